"""An opt-in event trace for teaching: what packed, unpacked, cloned or fired, in order.

The reference implementation calls :func:`emit` at the moments a learner wants to see
(a pack hook ran, an unpack hook ran, a saved tensor was cloned before a mutation, a hook
fired). Nothing is recorded unless a :func:`record` block is open, and when none is open the
cost is one module-attribute test per call site::

    if trace.ACTIVE:
        trace.emit("pack", tensor=t)

Tensors are named ``t0``, ``t1``, ... in the order the recording first sees them, so a
trace prints the same from run to run (no memory addresses, no ``id()`` values).

Example:
    >>> import torch
    >>> from course import trace
    >>> a = torch.ones(2, 3)
    >>> with trace.record() as events:
    ...     trace.emit("pack", tensor=a, name="MulBackward0")
    ...     trace.emit("unpack", tensor=a, name="MulBackward0")
    >>> [str(e) for e in events]
    ['pack MulBackward0 t0 (2, 3)', 'unpack MulBackward0 t0 (2, 3)']
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["ACTIVE", "Event", "Recording", "emit", "record", "tensor_name"]

#: True while at least one :func:`record` block is open. Call sites test it before emitting.
ACTIVE = False

_lock = threading.Lock()
_recordings: list[Recording] = []


@dataclass(frozen=True)
class Event:
    """One thing that happened. ``str(event)`` is the stable one-line form lessons print."""

    kind: str  # "pack", "unpack", "clone", "hook", "node", ...
    name: str = ""  # the node, hook or op it concerns
    tensor: str | None = None  # stable tensor name, "t0", "t1", ...
    shape: tuple[int, ...] | None = None
    detail: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        parts = [self.kind]
        if self.name:
            parts.append(self.name)
        if self.tensor is not None:
            parts.append(self.tensor)
        if self.shape is not None:
            parts.append(str(tuple(self.shape)))
        parts += [f"{k}={v}" for k, v in self.detail]
        return " ".join(parts)


class Recording(list):
    """A list of :class:`Event` with the tensor naming that belongs to one recording."""

    def __init__(self) -> None:
        super().__init__()
        # id(tensor) -> (weakref, name); the weakref guards against id reuse after free.
        self._names: dict[int, tuple[weakref.ref, str]] = {}
        self._count = 0  # only goes up: an id reused after a free must not reuse a name

    def name_of(self, t: torch.Tensor) -> str:
        known = self.known_name(t)
        if known is not None:
            return known
        name = f"t{self._count}"
        self._count += 1
        try:
            ref = weakref.ref(t)
        except TypeError:  # pragma: no cover - tensors support weakrefs
            ref = lambda: None  # noqa: E731
        self._names[id(t)] = (ref, name)
        return name

    def known_name(self, t: torch.Tensor) -> str | None:
        """The name ``t`` already has here, or None; unlike :meth:`name_of`, never a new one."""
        entry = self._names.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def lines(self) -> list[str]:
        return [str(e) for e in self]


def tensor_name(t: torch.Tensor) -> str | None:
    """The stable name of ``t`` in the innermost open recording, or None when none is open."""
    with _lock:
        return _recordings[-1].name_of(t) if _recordings else None


def emit(kind: str, name: str = "", tensor: torch.Tensor | None = None, **detail: Any) -> None:
    """Append an event to every open recording. A no-op when none is open."""
    if not ACTIVE:
        return
    with _lock:
        for rec in _recordings:
            rec.append(
                Event(
                    kind=kind,
                    name=name,
                    tensor=rec.name_of(tensor) if isinstance(tensor, torch.Tensor) else None,
                    shape=tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else None,
                    detail=tuple(sorted(detail.items())),
                )
            )


@contextmanager
def record() -> Iterator[Recording]:
    """Record every event emitted inside the block (from any thread) into a list."""
    global ACTIVE
    rec = Recording()
    with _lock:
        _recordings.append(rec)
        ACTIVE = True
    try:
        yield rec
    finally:
        with _lock:
            # by identity: recordings are lists, and two may hold equal events
            _recordings[:] = [r for r in _recordings if r is not rec]
            ACTIVE = bool(_recordings)
