"""Lesson 4: offloading saved activations, and what ``save_on_cpu`` leaves on the table.

torch's :class:`~torch.autograd.graph.save_on_cpu` is a pair of saved-tensor hooks: pack
copies every saved tensor to the host, unpack copies it back. That is the whole idea, and
four things cost it time or memory on a GPU:

1. it copies *every* saved tensor, parameters included (a weight saved by ``addmm`` is
   copied to the host and back every step although it never leaves the device);
2. it copies the same storage once per save (``relu``'s output is saved by ``relu`` and
   again by the next ``addmm``: two copies of one buffer);
3. its copies run on the compute stream (with ``pin_memory=True``) or block it (without);
4. it allocates a fresh host buffer per tensor per step, and fetches each tensor only when
   backward asks for it, once per unpack (a storage saved by two nodes comes back twice).

:class:`Offloader` keeps the hook shape and fixes those four, in the notation lessons print::

    Offloader(device='cpu', mode='passthrough', min_bytes=1048576)          # no GPU here
    Offloader(device='cpu', mode='copy', min_bytes=0)                       # plain copies
    Offloader(device='cuda', mode='stream', min_bytes=1048576, prefetch=2)  # the real one

The rules it keeps, per saved tensor ``t``::

    t is a Parameter, a leaf requiring grad, a view of one, or on ``modules``  # kept
    t.untyped_storage().nbytes() < min_bytes                                  # kept
    inside ``with offloader.exclude():``                                      # kept
    sparse, a lazy conj / neg view, a subclass, or on another device          # kept
    a view of a storage already offloaded (same version)                      # shares that copy
    otherwise                                                                 # one host copy per storage

and in backward each host copy comes back to the device once: the first unpack fetches it,
later unpacks of the same storage (``relu``'s output, saved by ``relu`` and by the next
``addmm``) share that device copy, and we let go of it at the last unpack, so it lives
exactly as long as the storage would have without offloading. ``mode='copy'`` thus moves
every offloaded byte twice, out once and back once (``h2d_bytes == offloaded_bytes``).

Whatever the rule, pack also stamps ``t``'s version counter and unpack compares it, so a
tensor written in place between forward and backward raises autograd's error, as it does
without hooks::

    with Offloader(min_bytes=0, device_type="cpu", mode="copy"):
        y = model(x)
    opt.step()               # updates the weights in place
    y.sum().backward()       # OK: RuntimeError ... modified by an inplace operation
                             # (torch's save_on_cpu: no error, a wrong gradient)

NOTE [Streams, events and who waits for whom] (``mode='stream'``)

- pack: the side stream waits for the compute stream (the tensor must exist), copies the
  whole storage into a pooled pinned buffer, and records an event. The compute stream does
  not wait. ``record_stream`` tells the caching allocator not to hand the device memory out
  again before the copy is done, and we hold the device bytes until the event completes.
- unpack: if the storage is still on the device (an alias, or ``retain_graph``) we reuse it;
  if a prefetch started, the compute stream waits on *that* event only; otherwise we copy now.
  Then we start host-to-device copies of the next ``prefetch`` storages in reverse pack order.
- a host buffer goes back to the pool when the graph lets go of it, tagged with its last
  event; the pool hands it out again only once that event has completed.

What is ours and what is torch's: torch has no offloader class; this module is the course's own code. It
plugs into torch's saved-tensor hooks (the C++ engine calls our pack and unpack) and uses
torch's copies, streams, events and caching allocator as they are. Its starting point is
torch's ``save_on_cpu`` (re-told in :mod:`course.autograd.saved_tensors`).

Index: :class:`Offloader`, :class:`OffloadStats` (host buffers come from
:class:`~course.offload.host_buffers.HostBufferPool`); re-exported from
``course.offload.model`` (the timing model) and ``course.offload.bench`` (the harness).

Differences from torch:

- ``save_on_cpu`` has no threshold, no parameter rule, no aliasing, no pool, no side stream,
  no prefetch, no counters and no trace events.
- We copy whole storages, not tensors: a saved view of a large storage brings the whole
  storage along (once, shared by every view of it).
- With ``pin_memory=False`` the host buffers are pageable and the driver makes each
  "asynchronous" copy synchronous with the host; ``mode='copy'`` is synchronous by design.
- We check versions, torch's hooks do not. Without hooks autograd refuses a saved tensor
  modified in place after it was saved; with any hooks it skips the check (what unpack
  returns need not be the tensor saved), so under ``save_on_cpu`` an optimizer step between
  forward and backward gives a silently wrong gradient. We stamp every saved tensor at pack
  (:class:`~course.autograd.version_check.VersionStamp`, weak references only) and raise
  autograd's own error at unpack, for every rule and mode alike: kept by reference (the
  wrong value), offloaded (a stale copy) or shared. ``check_versions=False`` turns it off.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from course import trace
from course.autograd.saved_tensors import saved_tensors_hooks
from course.autograd.version_check import VersionStamp
from course.offload.host_buffers import HostBufferPool

__all__ = ["OffloadStats", "Offloader"]

_MODES = ("auto", "passthrough", "copy", "stream")


@dataclass
class OffloadStats:
    """Counters an :class:`Offloader` keeps. Bytes are storage bytes.

    ``saved_bytes`` counts each storage the pack hook sees once; ``offloaded_bytes`` counts
    each host copy once; ``d2h_bytes`` / ``h2d_bytes`` count every copy made.
    """

    packed: int = 0
    unpacked: int = 0
    saved_bytes: int = 0
    offloaded_bytes: int = 0
    aliased: int = 0  # pack calls that reused a host copy of the same storage
    kept_param: int = 0
    kept_small: int = 0
    kept_excluded: int = 0
    kept_passthrough: int = 0
    kept_other: int = 0  # another device, a sparse / conj / subclass tensor
    d2h_bytes: int = 0
    h2d_bytes: int = 0
    prefetched: int = 0  # host-to-device copies started before backward asked

    @property
    def moved_bytes(self) -> int:
        return self.d2h_bytes + self.h2d_bytes


class _HostCopy:
    """The host copy of one device storage; shared by every saved view of it."""

    def __init__(self, host: torch.Tensor, device: torch.device, index: int, order: list, pool) -> None:
        self.host, self.device, self.index, self.order, self.pool = host, device, index, order, pool
        self.event = None  # last copy event that touched ``host`` (stream mode)
        self.pending = None  # device bytes held until the device-to-host copy is done
        self.resident: StorageWeakRef | None = None  # device storage while it is alive
        self.prefetch: tuple[torch.Tensor, Any] | None = None  # (device bytes, event)
        self.users = 0  # saved tensors (pack calls) that read this copy
        self.unpacks = 0  # of those, unpacked in the backward running now
        self.held: torch.Tensor | None = None  # device bytes kept for the remaining unpacks

    def __del__(self) -> None:  # the graph let go of us: the buffer goes back to the pool
        self.pool.release(self.host, self.event)


class _Kept:
    __slots__ = ("tensor", "reason", "name", "stamp")

    def __init__(self, tensor: torch.Tensor, reason: str, stamp: VersionStamp | None) -> None:
        self.tensor, self.reason, self.stamp = tensor.detach(), reason, stamp  # detach: no reference cycle
        self.name = trace.tensor_name(tensor) if trace.ACTIVE else None  # for the unpack event


class _Packed:
    __slots__ = ("copy", "dtype", "size", "stride", "offset", "name", "stamp")

    def __init__(self, copy: _HostCopy, t: torch.Tensor, stamp: VersionStamp | None) -> None:
        self.copy, self.dtype, self.stamp = copy, t.dtype, stamp
        self.size, self.stride, self.offset = t.size(), t.stride(), t.storage_offset()
        self.name = trace.tensor_name(t) if trace.ACTIVE else None


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def _record_stream(t: torch.Tensor, stream: Any) -> None:
    """``t.record_stream(stream)`` for device memory (host memory has no caching allocator)."""
    if t.device.type != "cpu":
        t.record_stream(stream)


def _is_param(t: torch.Tensor) -> bool:
    """A Parameter, a leaf that requires grad, or a view of one (``weight.t()`` in addmm).

    A view is judged by its base: a view made under no_grad (in a custom Function's
    forward) reports ``is_leaf`` and ``requires_grad`` although its base is an activation.
    """
    while t._base is not None:
        t = t._base
    return isinstance(t, torch.nn.Parameter) or (t.is_leaf and t.requires_grad)


class Offloader(saved_tensors_hooks):
    """Saved-tensor hooks that move large activations to pooled host buffers and back.

    Args:
        min_bytes: storages smaller than this stay where they are.
        device_type: the accelerator whose tensors we offload (``"cuda"``; ``"cpu"`` for
            ``mode='copy'`` on a machine without one).
        prefetch: in ``mode='stream'``, how many storages to fetch ahead during backward.
        pin_memory: pin the host buffers (ignored unless the device is available).
        mode: ``"auto"`` (``"stream"`` when the device is available, else
            ``"passthrough"``), ``"passthrough"`` (keep everything, count only),
            ``"copy"`` (synchronous copies) or ``"stream"`` (side stream and prefetch).
        modules: modules whose parameters and buffers are never offloaded (parameters are
            recognised without this; buffers are not).
        pool: a :class:`HostBufferPool` to share between offloaders.
        check_versions: raise autograd's in-place ``RuntimeError`` in backward when a saved
            tensor was modified after it was saved, whatever rule packed it (the check
            torch skips under hooks; see :mod:`course.autograd.version_check`). ``False``
            gives torch's behaviour with hooks: no check.

    Raises:
        ValueError: an unknown ``mode``, or ``mode='stream'`` without an available device.

    Example:
        >>> x = torch.randn(64, 64, requires_grad=True)
        >>> off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
        >>> with off:
        ...     y = (x * x).exp()   # mul saves x twice (a leaf: kept); exp's result is copied
        >>> y.sum().backward()
        >>> off, off.stats.offloaded_bytes, off.stats.kept_param
        (Offloader(device='cpu', mode='copy', min_bytes=0), 16384, 2)
        >>> torch.allclose(x.grad, 2 * x * (x * x).exp())
        True
    """

    def __init__(
        self,
        min_bytes: int = 1 << 20,
        device_type: str = "cuda",
        prefetch: int = 2,
        pin_memory: bool = True,
        mode: str = "auto",
        modules: Iterable[torch.nn.Module] = (),
        pool: HostBufferPool | None = None,
        check_versions: bool = True,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        module = getattr(torch, device_type, None)
        available = device_type != "cpu" and module is not None and module.is_available()
        if mode == "auto":
            mode = "stream" if available else "passthrough"
        if mode == "stream" and not available:
            raise ValueError(f"mode='stream' needs an available {device_type!r} device")
        self.min_bytes, self.prefetch, self.mode = min_bytes, prefetch, mode
        self.check_versions = check_versions
        self.device_type = device_type if available or mode == "copy" else "cpu"
        self._module = module if available else None
        self.modules = list(modules)
        self.pool = pool if pool is not None else HostBufferPool(pin_memory and available)
        self.stats = OffloadStats()
        self._lock = threading.RLock()
        self._excluded = 0
        # storage key -> [StorageWeakRef, counted?, (weakref to its _HostCopy, version)]
        self._seen: dict[tuple[str, int], list] = {}
        self._order: list = []  # weakrefs to this forward's host copies, in pack order
        self._module_keys: set[tuple[str, int]] = set()
        self._side: dict[torch.device, Any] = {}
        self._pending: list[_HostCopy] = []
        super().__init__(self._pack, self._unpack)

    def __repr__(self) -> str:
        extra = f", prefetch={self.prefetch}" if self.mode == "stream" else ""
        extra += "" if self.check_versions else ", check_versions=False"  # the default is not shown
        return (
            f"Offloader(device={self.device_type!r}, mode={self.mode!r}, min_bytes={self.min_bytes}{extra})"
        )

    def __enter__(self) -> None:
        self._module_keys = {_storage_key(t) for m in self.modules for t in (*m.parameters(), *m.buffers())}
        self._order = []  # a new forward: prefetch walks this pass's copies
        # We push our hooks ourselves rather than lesson 3's traced wrapper: our own
        # trace events say what moved. __exit__ (inherited) pops them.
        torch._C._autograd._push_saved_tensors_default_hooks(self._pack, self._unpack)

    @contextmanager
    def exclude(self) -> Iterator[None]:
        """Inside this block nothing is offloaded (tensors saved there are kept).

        Example:
            >>> off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
            >>> a = torch.ones(8, requires_grad=True)
            >>> with off, off.exclude():
            ...     b = (a * a).exp()
            >>> off.stats.kept_excluded, off.stats.offloaded_bytes
            (3, 0)
        """
        self._excluded += 1
        try:
            yield
        finally:
            self._excluded -= 1

    def reset_stats(self) -> None:
        """Zero the counters (the pool keeps its buffers)."""
        self.stats = OffloadStats()
        self._seen = {k: v for k, v in self._seen.items() if not v[0].expired()}
        for v in self._seen.values():
            v[1] = None  # seen again after the reset: count it again

    # ---------------------------------------------------------------- pack
    def _keep_reason(self, t: torch.Tensor, nbytes: int) -> str | None:
        if self._excluded:
            return "excluded"
        if _is_param(t) or _storage_key(t) in self._module_keys:
            return "param"
        if (
            t.device.type != self.device_type
            or t.layout != torch.strided
            or type(t) not in (torch.Tensor, torch.nn.Parameter)
            or t.is_conj()
            or t.is_neg()
            or nbytes % t.element_size()
        ):
            return "other"
        if nbytes == 0 or nbytes < self.min_bytes:
            return "small"
        return "passthrough" if self.mode == "passthrough" else None

    def _account(self, t: torch.Tensor, nbytes: int) -> list:
        """The bookkeeping entry of ``t``'s storage; counts its bytes the first time."""
        key = _storage_key(t)
        entry = self._seen.get(key)
        if entry is None or entry[0].expired():  # new storage (or the address was reused)
            entry = self._seen[key] = [StorageWeakRef(t.untyped_storage()), None, None]
            if len(self._seen) > 4096:
                self._seen = {k: v for k, v in self._seen.items() if not v[0].expired()}
        if entry[1] is None:
            self.stats.saved_bytes += nbytes
            entry[1] = "counted"
        return entry

    def _pack(self, t: torch.Tensor) -> _Kept | _Packed:
        version_stamp = VersionStamp(t) if self.check_versions else None  # weak: holds no bytes
        with self._lock:
            self._reap()
            self.stats.packed += 1
            try:
                nbytes = t.untyped_storage().nbytes()
            except (RuntimeError, NotImplementedError):  # no storage (a wrapper subclass)
                nbytes, reason = 0, "other"
            else:
                entry = self._account(t, nbytes)
                reason = self._keep_reason(t, nbytes)
            if reason is not None:
                setattr(self.stats, f"kept_{reason}", getattr(self.stats, f"kept_{reason}") + 1)
                if trace.ACTIVE:
                    trace.emit("pack", tensor=t, offloaded=False, reason=reason)
                return _Kept(t, reason, version_stamp)
            ref, version = entry[2] or (lambda: None, None)
            copy = ref() if version == t._version else None  # same bytes, already on the host
            alias = copy is not None
            if alias:
                self.stats.aliased += 1
            else:
                copy = self._offload(t, nbytes)
                entry[2] = (weakref.ref(copy), t._version)
            copy.users += 1
            if trace.ACTIVE:
                trace.emit("pack", tensor=t, offloaded=True, storage=copy.index, alias=alias)
            return _Packed(copy, t, version_stamp)

    def _offload(self, t: torch.Tensor, nbytes: int) -> _HostCopy:
        """Copy ``t``'s whole storage into a pooled host buffer (see the NOTE above)."""
        src = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
        copy = _HostCopy(self.pool.acquire(nbytes), t.device, len(self._order), self._order, self.pool)
        self._order.append(weakref.ref(copy))  # weak: the graph owns the copies
        if self.mode == "stream":
            compute, side = self._module.current_stream(t.device), self._side_stream(t.device)
            side.wait_stream(compute)  # the tensor must be written before we read it
            with self._module.stream(side):
                copy.host.copy_(src, non_blocking=True)
                copy.event = self._module.Event()
                copy.event.record(side)
            _record_stream(src, side)  # the allocator must not reuse it before the copy ends
            copy.pending = src  # ...and we keep it until the event completes (_reap)
            self._pending.append(copy)
        else:
            copy.host.copy_(src)
        self.stats.offloaded_bytes += nbytes
        self.stats.d2h_bytes += nbytes
        return copy

    def _reap(self) -> None:
        """Drop the device bytes of every finished device-to-host copy."""
        still = []
        for copy in self._pending:
            if copy.event.query():
                copy.pending = None
            else:
                still.append(copy)
        self._pending = still

    def _side_stream(self, device: torch.device):
        if device not in self._side:
            self._side[device] = self._module.Stream(device)
        return self._side[device]

    # -------------------------------------------------------------- unpack
    def _unpack(self, packed: _Kept | _Packed) -> torch.Tensor:
        if packed.stamp is not None:
            packed.stamp.check()  # before any fetch: a stale tensor is not brought back
        with self._lock:
            self._reap()  # forward's last copies: let their device bytes go
            self.stats.unpacked += 1
            if isinstance(packed, _Kept):
                if trace.ACTIVE:
                    self._emit_unpack(packed, packed.tensor, offloaded=False, reason=packed.reason)
                return packed.tensor
            copy = packed.copy
            storage, source = self._fetch(copy)
            out = torch.empty(0, dtype=packed.dtype, device=copy.device)
            out.set_(storage, packed.offset, packed.size, packed.stride)  # the saved view, rebuilt
            self._hold_until_last_unpack(copy, out)
            if self.mode == "stream":
                self._prefetch_before(copy)
            if trace.ACTIVE:
                self._emit_unpack(packed, out, offloaded=True, storage=copy.index, source=source)
            return out

    @staticmethod
    def _hold_until_last_unpack(copy: _HostCopy, out: torch.Tensor) -> None:
        """Keep the device copy for the other saved tensors of its storage, then let it go.

        Counted per backward: after ``copy.users`` unpacks the count starts again (a second
        backward with ``retain_graph`` fetches once more). An unpack outside backward
        (``y.grad_fn._saved_result``) is not counted and holds nothing. A backward that
        skips some of the users (``torch.autograd.grad`` of a few inputs) leaves the device
        copy held until the graph is freed: memory the graph would have held anyway.
        """
        if torch._C._current_autograd_node() is None:
            return
        copy.unpacks += 1
        if copy.unpacks < copy.users:
            copy.held = out  # a view of the device bytes: keeps them alive
        else:  # the last one: the node's own tensor keeps them until the node is done
            copy.unpacks, copy.held = 0, None

    @staticmethod
    def _emit_unpack(packed: _Kept | _Packed, out: torch.Tensor, **detail: Any) -> None:
        node = torch._C._current_autograd_node()  # None outside backward (grad_fn._saved_x)
        name = node.name() if node is not None else ""
        trace.emit("unpack", name=name, tensor=out, saved=packed.name, **detail)

    def _fetch(self, copy: _HostCopy) -> tuple[torch.UntypedStorage, str]:
        """The device storage of ``copy``: still resident, prefetched, or copied now."""
        if copy.held is not None:  # an earlier unpack of this backward fetched it
            return copy.held.untyped_storage(), "resident"
        if copy.resident is not None:  # another view (or retain_graph) brought it back
            storage = torch.UntypedStorage._new_with_weak_ptr(copy.resident.cdata)
            if storage is not None:
                return storage, "resident"
        if copy.prefetch is not None:
            buf, source = copy.prefetch[0], "prefetched"
        else:
            buf, source = self._start_h2d(copy), "copied"
        if self.mode == "stream":  # the compute stream waits for this copy, no other
            compute = self._module.current_stream(copy.device)
            compute.wait_event(copy.prefetch[1])
            _record_stream(buf, compute)  # allocated on the side stream, used on this one
        copy.prefetch = None
        copy.resident = StorageWeakRef(buf.untyped_storage())
        return buf.untyped_storage(), source

    def _start_h2d(self, copy: _HostCopy) -> torch.Tensor:
        """Start copying ``copy`` back to the device; in stream mode, on the side stream."""
        nbytes = copy.host.numel()
        self.stats.h2d_bytes += nbytes
        if self.mode != "stream":
            return torch.empty(nbytes, dtype=torch.uint8, device=copy.device).copy_(copy.host)
        side = self._side_stream(copy.device)
        with self._module.stream(side):
            buf = torch.empty(nbytes, dtype=torch.uint8, device=copy.device)
            buf.copy_(copy.host, non_blocking=True)
            copy.event = self._module.Event()
            copy.event.record(side)
        copy.prefetch = (buf, copy.event)
        return buf

    def _prefetch_before(self, copy: _HostCopy) -> None:
        """Start fetching the next ``prefetch`` storages backward will want (reverse pack order)."""
        started, i = 0, copy.index - 1
        while started < self.prefetch and i >= 0:
            other = copy.order[i]()
            i -= 1
            if other is None or other.prefetch is not None or other.held is not None:
                continue
            if other.resident is not None and not other.resident.expired():
                continue
            self._start_h2d(other)
            self.stats.prefetched += 1
            started += 1

    @property
    def saved_bytes(self) -> int:
        """Bytes of distinct storages the pack hook saw (``stats.saved_bytes``)."""
        return self.stats.saved_bytes

    @property
    def moved_bytes(self) -> int:
        """Bytes copied in either direction (``stats.moved_bytes``)."""
        return self.stats.moved_bytes
