"""Host buffers for offloaded activations, reused by size rather than allocated per tensor:
pinning host memory is slow, so an offloader that pins anew every step pays for it every step.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

__all__ = ["HostBufferPool"]


class HostBufferPool:
    """Host byte buffers (``uint8``), reused by size instead of allocated per tensor.

    Every offloaded storage is copied as raw bytes, so the key is the byte count alone
    (the dtype is always ``uint8``). A released buffer carries the event of the last copy
    that touched it and is handed out again only once that event has completed.

    Args:
        pin_memory: allocate page-locked buffers (needs a CUDA build with a device).

    Example:
        >>> pool = HostBufferPool()
        >>> a = pool.acquire(1024)
        >>> pool.release(a)
        >>> pool.acquire(1024) is a, pool
        (True, HostBufferPool(pin_memory=False, allocations=1, reuses=1, free=0))
    """

    def __init__(self, pin_memory: bool = False) -> None:
        self.pin_memory = pin_memory
        self.allocations = 0
        self.reuses = 0
        self._free: dict[int, list[tuple[torch.Tensor, Any]]] = {}
        self._lock = threading.Lock()

    def acquire(self, nbytes: int) -> torch.Tensor:
        """A host ``uint8`` buffer of exactly ``nbytes`` bytes, from the pool when one is idle."""
        with self._lock:
            free = self._free.get(nbytes, [])
            for i, (buf, event) in enumerate(free):
                if event is None or event.query():  # its last copy has finished
                    del free[i]
                    self.reuses += 1
                    return buf
            self.allocations += 1
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=self.pin_memory)

    def release(self, buf: torch.Tensor, event: Any = None) -> None:
        """Give ``buf`` back; it is reused once ``event`` (if any) has completed."""
        with self._lock:
            self._free.setdefault(buf.numel(), []).append((buf, event))

    def __repr__(self) -> str:
        free = sum(len(v) for v in self._free.values())
        return (
            f"HostBufferPool(pin_memory={self.pin_memory}, allocations={self.allocations}, "
            f"reuses={self.reuses}, free={free})"
        )
