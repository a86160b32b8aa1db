"""Non-reentrant activation checkpointing: save nothing inside, recompute in backward.

``checkpoint(fn, x, use_reentrant=False)`` runs ``fn`` once, keeping its graph but none of
the tensors its ops save for backward. When backward first needs one of them, ``fn`` runs
again (the *recomputation*) and hands the fresh tensors over::

    out = checkpoint(fn, x, use_reentrant=False)    # forward: fn's saves are kept as empty holders
    out.sum().backward()                            # first unpack: fn runs again, holders filled

It is built from one idea of lesson 3, a pair of saved-tensor hooks, used twice:

- ``_checkpoint_hook`` (pushed during the forward): its pack hook stores an empty
  ``_Holder`` instead of the tensor; its unpack hook runs the recomputation once per
  backward and returns the tensor recomputed for that holder.
- ``_recomputation_hook`` (pushed during the recomputation): its pack hook sees the
  recomputed tensors in the same order as the forward saved them, and puts the i-th into
  the i-th holder. Once the last one needed is in, it raises ``_StopRecomputationError``
  (early stop): the rest of ``fn`` does not run again.

A ``_CheckpointFrame`` per ``checkpoint`` call ties the two together: the inputs (kept as
saved tensors, so an outer checkpoint treats them as its own saves: nesting works), weak
references to the holders, the recomputed tensors per backward (``gid``), and the
determinism check's metadata. The RNG state of the forward is stashed and restored around
the recomputation, so dropout draws the same mask twice.

What the learner should remember::

    out = checkpoint(fn, x, use_reentrant=False)
    out.sum().backward()              # OK: fn ran twice (forward, then recomputed once)

    out.sum().backward(retain_graph=True)
    out.sum().backward()              # OK: each backward recomputes on its own

    def fn(x):
        return x.sin() if coin() else x.exp().exp()
    checkpoint(fn, x, use_reentrant=False).sum().backward()
                                      # BAD: the recomputation saves other tensors than the
                                      #     forward did: CheckpointError (the determinism check)

    checkpoint(fn, x)                 # BAD: no use_reentrant: a UserWarning, then torch's
                                      #     reentrant checkpoint runs (what torch 2.13 does)

Example:
    >>> import torch
    >>> calls = []
    >>> def fn(x):
    ...     calls.append("fn")
    ...     return x.sin().exp()
    >>> x = torch.ones(3, requires_grad=True)
    >>> y = checkpoint(fn, x, use_reentrant=False)
    >>> calls
    ['fn']
    >>> y.sum().backward()
    >>> calls
    ['fn', 'fn']
    >>> torch.allclose(x.grad, x.cos() * x.sin().exp())
    True

Under :func:`course.trace.record` the packs say which hook ran (the unpacks name the node):
the forward's two saves, then the recomputation's, in backward::

    pack _checkpoint_hook t0 (3,)         # sin saves its input
    pack _checkpoint_hook t1 (3,)         # exp saves its result
    pack _recomputation_hook t0 (3,)      # backward: fn runs again ...
    pack _recomputation_hook t2 (3,)      # ... and stops here (early stop)
    unpack ExpBackward0 t3 (3,) saved=t1
    unpack SinBackward0 t4 (3,) saved=t0

Differences from torch:

- ``use_reentrant=True`` (and omitted, after the warning) is handed to torch's own
  reentrant checkpoint: the course re-implements only the non-reentrant one;
- no ``torch.compile`` support: no dynamo wrappers, no proxy-mode checks;
- ``debug=True`` records the aten ops of the forward and of the recomputation with a small
  dispatch mode and lists them in the error; torch also prints stack traces;
- messages are ours; error *types* are torch's (``CheckpointError`` is torch's class).
- torch 2.14's ``respect_saved_tensors_hooks=`` and decorator form (``checkpoint(
  use_reentrant=False)`` without a function) exist here only when the installed torch has
  them, as everything here follows the installed torch; on 2.13 the keyword goes to the
  function, as torch 2.13 passes it.

Index: :func:`checkpoint`, :func:`set_checkpoint_early_stop`, :func:`noop_context_fn`,
``_CheckpointFrame``, ``_checkpoint_hook``, ``_recomputation_hook``; selective
checkpointing is in :mod:`course.autograd.selective`, RNG and autocast state in
:mod:`course.autograd.checkpoint_state`.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
import warnings
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils.checkpoint as _torch_checkpoint
from torch.utils.checkpoint import CheckpointError

from course.autograd.checkpoint_debug import debug_context_and_cb, debug_enabled
from course.autograd.checkpoint_state import ForwardState
from course.autograd.saved_tensors import saved_tensors_hooks

_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])  # (2, 13)

__all__ = ["CheckpointError", "checkpoint", "noop_context_fn", "set_checkpoint_early_stop"]

_DEFAULT_DETERMINISM_MODE = "default"
_enable_checkpoint_early_stop: bool | None = None

_TIP = "(Pass debug=True to checkpoint to see the ops of both runs side by side.)"


def noop_context_fn() -> tuple[contextlib.nullcontext, contextlib.nullcontext]:
    """The default ``context_fn``: two context managers that do nothing.

    Example:
        >>> fwd, recompute = noop_context_fn()
        >>> with fwd, recompute:
        ...     pass
    """
    return contextlib.nullcontext(), contextlib.nullcontext()


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Override ``early_stop`` for every checkpoint *created* (forward run) inside the block.

    Example:
        >>> import torch
        >>> x = torch.ones(2, requires_grad=True)
        >>> with set_checkpoint_early_stop(enable=False):
        ...     y = checkpoint(torch.exp, x, use_reentrant=False)
        >>> y.sum().backward()       # the block need not be open in backward
    """
    global _enable_checkpoint_early_stop
    prev = _enable_checkpoint_early_stop
    try:
        _enable_checkpoint_early_stop = enable
        yield
    finally:
        _enable_checkpoint_early_stop = prev


def _internal_assert(cond: bool) -> None:
    if not cond:
        raise AssertionError("course.checkpoint: an internal invariant broke; this is a bug in the course")


def _default_meta_extractor(x: torch.Tensor) -> dict[str, Any]:
    # Cheap to read and enough to catch a different op: shape, dtype, device.
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_allowed_determinism_checks_to_fns: dict[str, Callable[[torch.Tensor], Any]] = {
    _DEFAULT_DETERMINISM_MODE: _default_meta_extractor,
    "none": lambda _: None,
}


# NOTE [Nested checkpoints and the life of a recomputed tensor]
#
# 1. A saved tensor belongs to the innermost checkpoint open when it was saved; the outer
#    ones never see it (the innermost hook pair wins, lesson 3).
# 2. A checkpoint's inputs are saved tensors of the *enclosing* checkpoint (save_inputs
#    packs them while the outer hooks are on top). So unpacking a tensor of an inner
#    checkpoint first unpacks its inputs, which recomputes the outer one: every checkpoint
#    around a tensor runs again, outermost first, once per backward.
# 3. The recomputation starts with no checkpoint open: _recomputation_hook is pushed on top;
#    checkpoints met inside fn push their own _checkpoint_hook above it, as in the forward.
# 4. A recomputed tensor lives until its unpack, then its handle is dropped, even with
#    retain_graph=True: a second backward recomputes (a new gid, new handles).
#       out.backward(retain_graph=True); out.backward()       # yes: two recomputations
#       a node reading ctx.saved_tensors twice in one backward  # no: CheckpointError
# 5. Early stop: the recomputation ends (an exception) when the last holder is filled.
# 6. A backward inside fn may run before the forward is over and free holders; the
#    recomputation skips freed holders (weak references that died) instead of failing.


class _Handle:
    """A key of ``_CheckpointFrame.recomputed``: one per holder and backward."""


class _Holder:
    """What the forward packs instead of a tensor: ``handles[gid]`` finds its recomputed value."""

    def __init__(self) -> None:
        self.handles: dict[Any, _Handle | None] = {}


class _StopRecomputationError(Exception):
    """Raised by the recomputation's pack hook once every holder is filled (early stop)."""


class _CheckpointFrame:
    """The state of one checkpointed call (see the module docstring)."""

    def __init__(self, recompute_fn: Callable, early_stop: bool, unpack_error_cb, metadata_fn) -> None:
        self.recompute_fn = recompute_fn
        self.saved_args: list[Any] = []
        self.weak_holders: list[weakref.ReferenceType] = []
        # Weak keys: when autograd frees a saved value (its holder), the entry goes too.
        self.recomputed: defaultdict[Any, weakref.WeakKeyDictionary] = defaultdict(weakref.WeakKeyDictionary)
        self.recomp_counter: defaultdict[Any, int] = defaultdict(int)
        self.is_recomputed: defaultdict[Any, bool] = defaultdict(bool)
        self.early_stop = early_stop
        self.metadata_fn = metadata_fn
        self.unpack_error_cb = unpack_error_cb
        self.x_metadatas: list[Any] = []
        self.forward_completed = False
        self.ignore_saved_mismatch = False

    def save_inputs(self, *args: Any) -> None:
        # As saved tensors, so that an enclosing checkpoint's pack hook sees them (nesting).
        make = torch._C._autograd._make_saved_tensor
        self.saved_args = [make(a, is_output=False) if isinstance(a, torch.Tensor) else a for a in args]

    def get_inputs(self) -> list[Any]:
        saved = torch._C._autograd.SavedTensor
        return [a.unpack() if isinstance(a, saved) else a for a in self.saved_args]

    def check_recomputed_tensors_match(self, gid: Any) -> None:
        if self.ignore_saved_mismatch:
            return
        if len(self.weak_holders) != self.recomp_counter[gid]:
            raise CheckpointError(
                f"course.checkpoint: the function saved {len(self.weak_holders)} tensors for backward in "
                f"forward but {self.recomp_counter[gid]} when recomputed; it must run the same ops both times. {_TIP}"
            )
        different = []
        for idx, weak_holder in enumerate(self.weak_holders):
            holder = weak_holder()
            if holder is None:  # already freed by an earlier backward: nothing to compare
                continue
            handle = holder.handles.get(gid)
            _internal_assert(handle is not None and handle in self.recomputed[gid])
            recomputed_meta = self.metadata_fn(self.recomputed[gid][handle])
            if self.x_metadatas[idx] != recomputed_meta:
                different.append(
                    f"saved tensor {idx}: forward {self.x_metadatas[idx]}, recomputed {recomputed_meta}"
                )
        if different:
            raise CheckpointError(
                "course.checkpoint: recomputed tensors differ from the forward's in shape, dtype or device:\n"
                + "\n".join(different)
                + f"\n{_TIP}"
            )


class _checkpoint_internal_hook(saved_tensors_hooks):
    """Checkpointing's own hooks (torch 2.14's class of this name): while pushed, the pack hook
    remembers the pair below it, so selective checkpointing finds the user's hooks past ours
    (NOTE [Cached outputs and the user's hooks] in :mod:`course.autograd.selective`)."""

    def __init__(self, pack_hook: Callable, unpack_hook: Callable) -> None:
        pack_hook._checkpoint_internal = True
        super().__init__(pack_hook, unpack_hook)

    def __enter__(self) -> None:
        # the pair below us (maybe another checkpoint's: the reader walks on), and only while
        # we are on the stack: the graph keeps pack_hook, and must not keep the user's pair
        self.pack_hook._user_hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
        super().__enter__()

    def __exit__(self, *args: object) -> None:
        del self.pack_hook._user_hooks
        super().__exit__(*args)


class _recomputation_hook(_checkpoint_internal_hook):
    """Pushed while ``fn`` runs again: the i-th tensor saved goes into the i-th holder."""

    def __init__(self, target_frame_ref: weakref.ReferenceType, gid: Any) -> None:
        def pack_hook(x: torch.Tensor) -> torch.Tensor:
            x = x.detach() if x.requires_grad else x
            frame = target_frame_ref()
            _internal_assert(frame is not None)
            recomp_idx = frame.recomp_counter[gid]
            frame.recomp_counter[gid] += 1
            if recomp_idx >= len(frame.weak_holders):
                _internal_assert(not frame.early_stop)
                if not frame.forward_completed:
                    # backward inside fn, early stop off: the forward has not saved them all yet
                    frame.ignore_saved_mismatch = True
                    return x
                raise CheckpointError(
                    "course.checkpoint: the recomputation saves more tensors for backward than the "
                    f"forward did ({len(frame.weak_holders)}). {_TIP}"
                )
            holder = frame.weak_holders[recomp_idx]()
            if holder is not None:  # None: freed already (a backward inside fn), skip it
                _internal_assert(holder.handles.get(gid) is None)
                holder.handles[gid] = _Handle()
                frame.recomputed[gid][holder.handles[gid]] = x
            if frame.early_stop and frame.recomp_counter[gid] == len(frame.weak_holders):
                raise _StopRecomputationError
            # Returned as well: a backward through the recomputed graph itself may need it.
            return x

        pack_hook.__name__ = "_recomputation_hook"  # what course.trace prints for its packs
        super().__init__(pack_hook, lambda x: x)


def _current_gid() -> Any:
    """Which backward is asking: a GraphExecGroup, else the graph task, else a fresh id."""
    gid = torch._C._get_graph_exec_group()
    if gid is None:
        gid = torch._C._current_graph_task_id()
        if gid == -1:  # unpacked outside any backward (grad_fn._saved_self, say)
            gid = int(uuid.uuid4())
    return gid


class _checkpoint_hook(_checkpoint_internal_hook):
    """Pushed during the checkpointed forward: pack an empty holder, recompute on unpack."""

    def __init__(self, frame: _CheckpointFrame) -> None:
        def pack_hook(x: torch.Tensor) -> _Holder:
            holder = _Holder()
            frame.weak_holders.append(weakref.ref(holder))
            if frame.metadata_fn is not None:
                with torch.no_grad():
                    frame.x_metadatas.append(frame.metadata_fn(x))
            return holder

        def unpack_hook(holder: _Holder) -> torch.Tensor:
            gid = _current_gid()
            if not frame.is_recomputed[gid]:
                args = frame.get_inputs()
                try:
                    with _recomputation_hook(weakref.ref(frame), gid), torch.autograd.enable_grad():
                        frame.recompute_fn(*args)
                except _StopRecomputationError:
                    pass
                frame.is_recomputed[gid] = True
                frame.check_recomputed_tensors_match(gid)
            _internal_assert(gid in holder.handles)
            if holder.handles[gid] is None:
                grouped = ""
                if torch._C._get_graph_exec_group() is not None:  # torch's GraphExecGroup is on
                    grouped = (
                        "inside a torch.utils.checkpoint.GraphExecGroup, two backward calls may not "
                        "need the same saved activation (their graphs overlap); "
                    )
                raise CheckpointError(
                    "course.checkpoint: this saved tensor was already unpacked once"
                    + ("; " if grouped else " in this backward; ")
                    + grouped
                    + "a checkpointed tensor can be read once per backward (read ctx.saved_tensors once)."
                )
            ret = frame.recomputed[gid][holder.handles[gid]]
            holder.handles[gid] = None  # Rule: recomputed tensors die as soon as they are used
            return ret

        pack_hook.__name__ = "_checkpoint_hook"  # what course.trace prints for its packs
        if frame.unpack_error_cb is None:
            super().__init__(pack_hook, unpack_hook)
            return

        def unpack_hook_with_error_cb(holder: _Holder) -> torch.Tensor:
            try:
                return unpack_hook(holder)
            except CheckpointError as e:
                frame.unpack_error_cb(e)
                raise

        super().__init__(pack_hook, unpack_hook_with_error_cb)


_SUPPRESSED = (
    "course.checkpoint: the forward context of context_fn swallowed an exception raised by the "
    "checkpointed function; checkpoint has no result to return for a forward that failed."
)


def _checkpoint_without_reentrant_generator(
    fn,
    preserve_rng_state=True,
    context_fn=noop_context_fn,
    determinism_check=_DEFAULT_DETERMINISM_MODE,
    debug=False,
    early_stop=True,
    *args,
    **kwargs,
):
    """The non-reentrant checkpoint as a generator: before its first ``yield`` the set-up,
    around it ``fn``'s forward (run by :func:`checkpoint`), after it the checks."""
    unpack_error_cb = None
    if debug_enabled(debug):  # set_checkpoint_debug_enabled, when set, wins over the argument
        if context_fn is not noop_context_fn:
            raise ValueError("course.checkpoint: debug=True brings its own context_fn; pass one or the other")
        context_fn, unpack_error_cb = debug_context_and_cb()
    if determinism_check not in _allowed_determinism_checks_to_fns:
        raise ValueError(
            f"course.checkpoint: determinism_check must be one of {list(_allowed_determinism_checks_to_fns)}, "
            f"not {determinism_check}"
        )
    metadata_fn = _allowed_determinism_checks_to_fns[determinism_check]
    forward_context, recompute_context = context_fn()
    state = ForwardState.capture(args, preserve_rng_state)

    def recompute_fn(*inputs: Any) -> None:
        with state.restored(), recompute_context:
            fn(*inputs, **kwargs)

    stop = _enable_checkpoint_early_stop if _enable_checkpoint_early_stop is not None else early_stop
    new_frame = _CheckpointFrame(recompute_fn, stop, unpack_error_cb, metadata_fn)
    if not torch.is_grad_enabled():  # no graph, nothing will be saved: a plain call
        yield
        return
    new_frame.save_inputs(*args)
    suppressed = False
    with _checkpoint_hook(new_frame), forward_context:
        try:
            yield
        except BaseException:
            suppressed = True
            raise
    if suppressed:
        raise RuntimeError(_SUPPRESSED)
    new_frame.forward_completed = True
    state.check_device_not_initialized_in_forward()


def _warn_use_reentrant_missing() -> None:
    warnings.warn(
        "course.checkpoint: pass use_reentrant explicitly. Without it torch 2.13 still runs the "
        "reentrant checkpoint (use_reentrant=True), and so does the course, by handing the call to "
        "torch; use_reentrant=False is the variant the course re-implements and recommends.",
        stacklevel=3,
    )


def checkpoint(
    function: Callable | None = None,
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple[Any, Any]] = noop_context_fn,
    determinism_check: str = _DEFAULT_DETERMINISM_MODE,
    debug: bool = False,
    early_stop: bool = True,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args, **kwargs)`` saving none of its activations; recompute them in backward.

    Args:
        function: what to run; any Python callable on tensors and other values.
        *args, **kwargs: its arguments (``preserve_rng_state`` is read from ``kwargs`` and
            removed, as torch does: default True).
        use_reentrant: False for the course's implementation; True, or omitted (with a
            UserWarning), hands the call to torch's reentrant checkpoint, as torch 2.13 does.
        context_fn: returns two context managers: the forward runs under the first, the
            recomputation under the second (see :func:`course.autograd.selective.create_selective_checkpoint_contexts`).
        determinism_check: ``"default"`` compares shape, dtype and device of every saved
            tensor with its recomputed twin; ``"none"`` compares nothing.
        debug: on a determinism error, list the aten ops of the forward and the recomputation.
        early_stop: stop the recomputation once every needed tensor is back.
        respect_saved_tensors_hooks: (torch 2.14 on, in ``kwargs``) whether the outputs a
            selective-checkpointing policy saves go through the user's saved-tensor hooks
            (NOTE [Cached outputs and the user's hooks] in :mod:`course.autograd.selective`).

    Returns:
        Whatever ``function`` returns; from torch 2.14 on, called without a function (and no
        arguments), a decorator that checkpoints every call with these settings.

    Raises:
        CheckpointError: in backward, when the recomputation saves other tensors than the forward.
        ValueError: an unknown ``determinism_check``; ``debug=True`` with a ``context_fn``.
        RuntimeError: ``context_fn``'s forward context swallowed an exception of ``function``.

    Example:
        >>> import torch
        >>> x = torch.randn(4, requires_grad=True)
        >>> y = checkpoint(lambda t, *, k: (t * k).sin(), x, k=2.0, use_reentrant=False)
        >>> y.sum().backward()
        >>> torch.allclose(x.grad, 2.0 * (2.0 * x).cos())
        True
    """
    settings = dict(
        context_fn=context_fn, determinism_check=determinism_check, debug=debug, early_stop=early_stop
    )
    if function is None and not args:
        if _TORCH < (2, 14):
            raise TypeError(
                "course.checkpoint: checkpoint() needs the function to run (torch 2.13 has no decorator form)"
            )
        return _decorator(use_reentrant, settings, kwargs)
    respect = kwargs.pop("respect_saved_tensors_hooks", None) if _TORCH >= (2, 14) else None
    if use_reentrant is None:
        _warn_use_reentrant_missing()
        use_reentrant = True
    if use_reentrant:
        torch_context_fn = _torch_checkpoint.noop_context_fn if context_fn is noop_context_fn else context_fn
        if respect is not None:  # torch refuses it with the reentrant variant
            kwargs["respect_saved_tensors_hooks"] = respect
        return _torch_checkpoint.checkpoint(
            function,
            *args,
            use_reentrant=True,
            context_fn=torch_context_fn,
            determinism_check=determinism_check,
            debug=debug,
            early_stop=early_stop,
            **kwargs,
        )
    if context_fn is not noop_context_fn:
        context_fn = _telling_the_cache(context_fn, respect)
    preserve = kwargs.pop("preserve_rng_state", True)
    gen = _checkpoint_without_reentrant_generator(
        function, preserve, context_fn, determinism_check, debug, early_stop, *args, **kwargs
    )
    next(gen)  # set-up: frame, hooks pushed
    try:
        ret = function(*args, **kwargs)
    except BaseException as e:
        try:
            gen.throw(e)
        except StopIteration as stop:
            raise RuntimeError(_SUPPRESSED) from stop
        raise
    try:
        next(gen)  # hooks popped, checks
    except StopIteration:
        return ret
    raise AssertionError("course.checkpoint: the checkpoint generator yielded more than twice")


def _telling_the_cache(context_fn: Callable, respect: bool | None) -> Callable:
    """``context_fn`` whose forward context, if it caches outputs (selective checkpointing),
    learns ``respect_saved_tensors_hooks``, as torch sets it on its caching mode."""

    def contexts() -> tuple[Any, Any]:
        forward_context, recompute_context = context_fn()
        if hasattr(forward_context, "respect_saved_tensors_hooks"):
            forward_context.respect_saved_tensors_hooks = respect
        return forward_context, recompute_context

    return contexts


def _decorator(use_reentrant: bool | None, settings: dict, kwargs: dict) -> Callable:
    """torch 2.14's curried form: ``checkpoint(use_reentrant=False, ...)`` returns a decorator."""
    known = {k: kwargs.pop(k) for k in ("preserve_rng_state", "respect_saved_tensors_hooks") if k in kwargs}
    if kwargs:
        raise ValueError(
            "course.checkpoint: a decorator takes only checkpoint's settings, not " + ",".join(kwargs)
        )
    return functools.partial(_CheckpointedFunction, use_reentrant=use_reentrant, **settings, **known)


class _CheckpointedFunction:
    """A function whose every call is checkpointed with the settings it was made with; as a
    method decorator it binds to the instance first (torch 2.14's class of this name)."""

    def __init__(self, function: Callable, **settings: Any) -> None:
        self.function, self.settings = function, settings
        functools.update_wrapper(self, function, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return checkpoint(self.function, *args, **self.settings, **kwargs)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        bind = getattr(self.function, "__get__", None)
        if instance is None or bind is None:
            return self
        return type(self)(bind(instance, owner), **self.settings)
