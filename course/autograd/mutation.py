"""Lesson 5: mutating a tensor that backward still needs.

Normally autograd refuses::

    b = a.clone()
    out = (b ** 2).sum()     # PowBackward0 saves b (version 0)
    b.sin_()                 # b is now version 1
    out.backward()           # BAD: RuntimeError ... modified by an inplace operation

Inside :func:`allow_mutation_on_saved_tensors` the same program works: the saved ``b`` is
*cloned just before* ``sin_`` overwrites it, and backward reads the clone.

What is ours and what is torch's: the design, the class and function names and the two error messages are
torch's (``torch/autograd/graph.py``, a thin Python layer over the C++ engine's saved-tensor
hooks and ``TorchDispatchMode``). This module is the course's code for that layer: written
again in our words, with the aliasing test rebuilt (see "Differences from torch") and a
repr and trace events for the lessons. The engine, the hooks' C++ side and the dispatcher
are torch's and are called, not re-implemented. Two pieces do the work:

- ``_swap_with_cloned``, a pair of saved-tensor hooks: pack stores an opaque ``_Handle``
  and remembers the tensor as ``ctx.original[handle]``; unpack returns
  ``ctx.cloned[handle]`` if a clone was made, else the original;
- ``_CloneArgBeforeMutateMode``, a ``TorchDispatchMode`` that sees every aten op. For an op
  that writes to an argument (``Tensor(a!)`` in its schema: ``mul_``, ``out=``, foreach
  lists) it looks up which saved tensors alias that argument and clones them first.

The algorithm, in the three steps of torch's NOTE [Allow mutation on tensors saved for
backward], with our step 2::

    1. a tensor is saved:   tid = (id, data_ptr, version)  -> handle   (which tensor)
                            sid = storage base address     -> {tids}   (which memory)
    2. an op will write t:  for every live, not yet cloned tid with t's sid whose bytes
                            overlap t's: clone the original, drop our reference to it
    3. backward:            a clone exists  <=>  the tensor was mutated after saving

Differences from torch:

- **Offset views.** torch keys step 2 by ``t.data_ptr()``, the address of a tensor's
  *first element*. A view that starts elsewhere (``b[1]``, ``b[:, 2:]``) has another
  data_ptr than the saved ``b`` although it shares b's memory and version counter, so
  ``b[1].mul_(3)`` finds nothing to clone and backward reads the mutated values: a
  silently wrong gradient (the same happens when the *saved* tensor is the offset view
  and its base is mutated). Our ``_get_sid`` keys by the storage's base address
  (``data_ptr - storage_offset * itemsize``) and then checks that the bytes really
  overlap (:func:`course.autograd.overlap.overlaps`), so ``b[0]`` and ``b[1]`` do not clone each other.
- **Version drift.** torch's sid is ``(data_ptr, version)``, but views share one version
  counter: after ``b[0]`` is saved, ``b[1].mul_(2)`` (other bytes, rightly no clone) moves
  the counter on, and a later ``b[0].mul_(2)`` no longer matches the saved sid, so it is
  missed too. Our sid has no version: "already cloned" is the handle being in
  ``ctx.cloned``, which is what the version was standing in for.
- **Multi-output ``out=`` ops** (``torch.max(x, 0, out=(v, i))``): torch reads
  ``kwargs["out"]`` and raises ``KeyError: 'out'``; we read each out argument by its name.
- **A failed nested entry** raises the same ``RuntimeError`` as torch, but does not switch
  off the enclosing context (torch's ``finally`` resets the global flag, so the outer
  context's backward then fails with "Trying to backward outside ...").
- **Speed.** torch scans every op's schema for written arguments on every call; we cache
  the positions per ``OpOverload`` and skip the scan when nothing is saved. Whether the
  written bytes meet a saved tensor's is decided from sizes, strides and offsets (NOTE [Do
  two strided views share an element?] below), in microseconds at any size: a
  ``Linear(2048, 2048)`` whose ``weight`` is updated in place costs what it costs in torch.
- **Watching it.** ``repr(ctx)`` lists each live saved handle in save order: the version
  its tensor had when saved, and whether backward will read the original or a clone (no
  addresses)::

      _AllowMutationOnSavedContext(saved=2)
        h0: saved at version 0, cloned f32[2, 3]
        h1: saved at version 0, original f32[3]

  Inside a :func:`course.trace.record` block the rows also give the trace names of the
  saved tensor and of its clone (``h0: t0 saved at version 0, cloned (t2) f32[2, 3]``),
  each clone is an event naming the write's op, the saved tensor, the clone, the handle,
  the tensor that was written and the version the saved tensor was saved at::

      clone aten.mul_.Tensor t0 (2, 3) clone=t2 handle=h0 mutated=t1 version=0

  and each unpack says which handle it read (its tensor is the clone's name, t2, once a
  clone was made)::

      unpack PowBackward0 t2 (2, 3) handle=h0 saved=t0

The lesson's offset-view program, where torch's ``a.grad`` has row 1 three times too large:

    >>> import torch
    >>> a = torch.randn(3, 4, requires_grad=True)
    >>> with allow_mutation_on_saved_tensors():
    ...     b = a.clone()
    ...     out = (b ** 2).sum()
    ...     _ = b[1].mul_(3)      # an offset view of the saved b
    ...     out.backward()
    >>> torch.allclose(a.grad, 2 * a.detach())   # d/da sum(a**2), b's saved value
    True

The same program, traced: writing ``b[1]`` (t1) clones the saved ``b`` (t0) into t2, and
backward reads t2 through h0:

    >>> from course import trace
    >>> a = torch.ones(3, 4, requires_grad=True)
    >>> with trace.record() as events, allow_mutation_on_saved_tensors() as ctx:
    ...     b = a.clone()
    ...     out = (b ** 2).sum()
    ...     _ = b[1].mul_(3)
    ...     print(ctx)
    ...     out.backward()
    _AllowMutationOnSavedContext(saved=1)
      h0: t0 saved at version 0, cloned (t2) f32[3, 4]
    >>> for line in events.lines():
    ...     print(line)
    pack pack_hook t0 (3, 4)
    clone aten.mul_.Tensor t0 (3, 4) clone=t2 handle=h0 mutated=t1 version=0
    unpack PowBackward0 t2 (3, 4) handle=h0 saved=t0
"""

from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from collections.abc import Generator, Iterable, MutableMapping
from typing import Any, TypeAlias
from weakref import WeakKeyDictionary, WeakValueDictionary

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course import trace
from course.autograd.graph import short_type
from course.autograd.overlap import overlaps
from course.autograd.saved_tensors import saved_tensors_hooks

__all__ = ["allow_mutation_on_saved_tensors"]

_allow_mutation_on_saved_tensors_enabled: bool = False

_TID: TypeAlias = tuple[int, int, int]  # (id(tensor), data_ptr, version): which tensor
_SID: TypeAlias = int  # storage base address: which memory (torch: (data_ptr, version))


def _data_ptr(tensor: torch.Tensor) -> int:
    if type(tensor) is not torch.Tensor and isinstance(  # fast path for plain tensors
        tensor,
        (
            torch._subclasses.fake_tensor.FakeTensor,
            torch._subclasses.functional_tensor.FunctionalTensor,
        ),
    ):
        return 0  # no real memory; torch does the same (its FIXME)
    return tensor.data_ptr()


def _get_tid(tensor: torch.Tensor) -> _TID:
    return (id(tensor), _data_ptr(tensor), tensor._version)


def _get_sid(tensor: torch.Tensor) -> _SID:
    # torch: (tensor.data_ptr(), tensor._version). The first element's address differs
    # between a tensor and its offset views, so we step back to the start of the storage;
    # and the version is shared by all views, so it cannot tell them apart (see above).
    return _data_ptr(tensor) - tensor.storage_offset() * tensor.element_size()


class _Handle:
    """What the graph stores instead of a saved tensor: ``idx`` is the save order, ``version``
    the saved tensor's version when it was packed. ``name`` and ``clone_name`` are the trace
    names of the saved tensor and of its clone, when a recording saw them. Only strings and
    ints: a handle keeps no tensor alive."""

    def __init__(self, idx: int = 0, version: int = 0, name: str | None = None) -> None:
        self.idx = idx
        self.version = version
        self.name = name
        self.clone_name: str | None = None

    def __repr__(self) -> str:
        return f"h{self.idx}"

    def trace_detail(self) -> dict[str, str]:
        """What the unpack event says about this packed value; the tracing wrapper of
        ``course.autograd.saved_tensors`` asks any packed value that has this method."""
        return {"handle": repr(self)}

    def describe(self, tensor: torch.Tensor, cloned: bool) -> str:
        """A row of the context's repr: ``h0: t0 saved at version 0, cloned (t4) f32[3]``."""
        saved = f"{self.name} saved" if self.name else "saved"
        state = "original"
        if cloned:
            state = f"cloned ({self.clone_name})" if self.clone_name else "cloned"
        return f"{self!r}: {saved} at version {self.version}, {state} {short_type(tensor)}"


class _swap_with_cloned(saved_tensors_hooks):
    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        def pack_hook(tensor: torch.Tensor) -> _Handle:
            tid = _get_tid(tensor)
            ctx.sid_to_tid[_get_sid(tensor)].add(tid)  # which memory this tensor lives in
            # A tensor saved twice at one version (b * b) shares one handle, hence one clone.
            handle = ctx.tid_to_weakhandle.get(tid)
            if handle is None:
                name = trace.tensor_name(tensor) if trace.ACTIVE else None
                handle = _Handle(ctx.next_idx, version=tid[2], name=name)
                ctx.next_idx += 1
                ctx.tid_to_weakhandle[tid] = handle
                ctx.original[handle] = tensor
            return handle  # a strong reference: the graph keeps the handle alive

        def unpack_hook(handle: _Handle) -> torch.Tensor:
            # Kept word for word, missing space ("contextin") included: the conformance
            # test compares it with the message torch raises.
            error_msg = (
                "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
                "in which the graph was originally recorded."
            )
            if not _allow_mutation_on_saved_tensors_enabled:
                raise AssertionError(error_msg)
            res = ctx.cloned.get(handle)  # one lookup where torch does `in` then `[]`
            if res is None:
                res = ctx.original.get(handle)
                if res is None:
                    raise AssertionError(error_msg)
            return res

        super().__init__(pack_hook, unpack_hook)


@functools.cache  # an op's schema never changes: read it once per op
def mutable_args(func: Any) -> tuple[Any, tuple[tuple[int, str, bool], ...]]:
    """How to call the op ``func``, and ``((position, name, kwarg_only), ...)`` of the arguments
    its schema says it writes (``mul_``'s ``self``, an ``out=``); ``()`` for an op that writes
    nothing.

    >>> mutable_args(torch.ops.aten.mul_.Tensor)[1], mutable_args(torch.ops.aten.add.Tensor)[1]
    (((0, 'self', False),), ())
    """
    written = tuple(
        (idx, arg.name, arg.kwarg_only)
        for idx, arg in enumerate(func._schema.arguments)
        if arg.alias_info is not None and arg.alias_info.is_write
    )
    # OpOverload.__call__ is just `self._op(*args, **kwargs)`: call _op, one frame less.
    call = func._op if type(func) is torch._ops.OpOverload else func
    return call, written


class _CloneArgBeforeMutateMode(TorchDispatchMode):
    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        super().__init__()
        self.ctx = ctx

    def __torch_dispatch__(
        self,
        func: Any,
        types: Iterable[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[Any, Any] | None = None,
    ) -> Any:
        call, written = mutable_args(func)
        if written and self.ctx.sid_to_tid:  # an op that writes, and something is saved
            for idx, name, kwarg_only in written:
                if kwarg_only or idx >= len(args):  # out=, and other keyword arguments
                    arg = (kwargs or {}).get(name)
                else:
                    arg = args[idx]
                if isinstance(arg, torch.Tensor):
                    self.ctx.maybe_clone(arg, func)
                elif isinstance(arg, (list, tuple)):  # foreach ops write a list
                    for t in arg:
                        self.ctx.maybe_clone(t, func)
        return call(*args, **kwargs) if kwargs else call(*args)


class _AllowMutationOnSavedContext:
    def __init__(self) -> None:
        self.cloned: MutableMapping[_Handle, torch.Tensor] = WeakKeyDictionary()
        self.original: MutableMapping[_Handle, torch.Tensor] = WeakKeyDictionary()
        self.tid_to_weakhandle: MutableMapping[_TID, _Handle] = WeakValueDictionary()
        self.sid_to_tid: dict[_SID, set[_TID]] = defaultdict(set)
        self.next_idx = 0

    def maybe_clone(self, t: torch.Tensor, func: Any = None) -> None:
        """Clone every live saved tensor whose memory ``t`` is about to overwrite."""
        tids = self.sid_to_tid.get(_get_sid(t))
        if not tids:
            return
        for tid in tids:
            # A tid whose handle died was saved, then freed by backward before this write.
            handle = self.tid_to_weakhandle.get(tid)
            if handle is None or handle in self.cloned:
                continue
            original = self.original[handle]
            if not overlaps(original, t):
                continue  # same storage, other bytes
            self.cloned[handle] = clone = original.clone()
            del self.original[handle]
            if trace.ACTIVE:
                mutated = trace.tensor_name(t)
                handle.clone_name = trace.tensor_name(clone)
                trace.emit(
                    "clone",
                    name=str(func),
                    tensor=original,
                    handle=repr(handle),
                    mutated=mutated,
                    clone=handle.clone_name,
                    version=handle.version,
                )

    def clear(self) -> None:
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()

    def __repr__(self) -> str:
        saved = [(h, t, False) for h, t in list(self.original.items())]
        saved += [(h, t, True) for h, t in list(self.cloned.items())]
        saved.sort(key=lambda entry: entry[0].idx)  # save order
        rows = [f"  {h.describe(t, cloned)}" for h, t, cloned in saved]
        return "\n".join([f"{type(self).__name__}(saved={len(rows)})", *rows])


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Generator[_AllowMutationOnSavedContext, None, None]:
    """Let a program write in place to tensors that backward has saved.

    Inside the block, an in-place op (``b.mul_(2)``, ``out=b``, ``b[1].zero_()``) that is
    about to overwrite bytes some saved tensor still needs clones that saved tensor first;
    backward then reads the clone, i.e. the values as they were when saved. The graph
    must be recorded and run backward inside one and the same block.

    Returns:
        The :class:`_AllowMutationOnSavedContext` holding the state (handy in lessons:
        its repr lists each saved handle and whether it is still the original or a
        clone). The state is cleared on exit.

    Raises:
        RuntimeError: ``allow_mutation_on_saved_tensors contexts cannot be nested``.
        AssertionError: from backward, when the graph was recorded in a context that
            has since exited ("Trying to backward outside of ...").

    Example:
        >>> import torch
        >>> with allow_mutation_on_saved_tensors() as ctx:
        ...     a = torch.ones(2, 3, requires_grad=True)
        ...     b = a.clone()
        ...     out = (b**2).sum()
        ...     print(ctx)
        ...     _ = b.mul_(2)   # mul by a number saves nothing new
        ...     print(ctx)
        ...     out.backward()
        _AllowMutationOnSavedContext(saved=1)
          h0: saved at version 0, original f32[2, 3]
        _AllowMutationOnSavedContext(saved=1)
          h0: saved at version 0, cloned f32[2, 3]
        >>> a.grad
        tensor([[2., 2., 2.],
                [2., 2., 2.]])
    """
    global _allow_mutation_on_saved_tensors_enabled
    if _allow_mutation_on_saved_tensors_enabled:  # checked before touching any state
        # torch's message, word for word (the conformance test compares the two)
        raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
    ctx = _AllowMutationOnSavedContext()
    with _swap_with_cloned(ctx), _CloneArgBeforeMutateMode(ctx):
        try:
            _allow_mutation_on_saved_tensors_enabled = True
            yield ctx
        finally:
            ctx.clear()
            _allow_mutation_on_saved_tensors_enabled = False
