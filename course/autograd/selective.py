"""Selective activation checkpointing (SAC): a policy per op decides save or recompute.

Plain checkpointing recomputes every op of the region. A policy can keep the expensive
ones (a matmul) and recompute only the cheap ones (a pointwise op)::

    def policy_fn(ctx, op, *args, **kwargs):
        if op == torch.ops.aten.mm.default:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    context_fn = functools.partial(create_selective_checkpoint_contexts, policy_fn)
    checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)

It is two ``TorchDispatchMode``s sharing one ``storage`` dict, given to ``checkpoint`` as
its two contexts:

- ``_CachingTorchDispatchMode`` (the forward's): runs each op, asks the policy, and stores
  ``storage[op][i]`` = the i-th call's output (detached) or ``_RECOMPUTE``;
- ``_CachedTorchDispatchMode`` (the recomputation's): counts the calls the same way; a
  stored output is handed back instead of running the op (then marked ``_CONSUMED``), a
  ``_RECOMPUTE`` entry runs the op again.

What the learner should remember::

    create_selective_checkpoint_contexts([torch.ops.aten.mm.default])
                                  # OK: a list means MUST_SAVE for these ops, PREFER_RECOMPUTE else
    create_selective_checkpoint_contexts([torch.ops.aten.mm])
                                  # BAD: an OpOverloadPacket; name the overload (.default): ValueError

    out.backward(retain_graph=True)
    out.backward()                # BAD with a saved op: its cached output was consumed by the
                                  #     first backward: RuntimeError (torch's rule, ours too)

    policy returns True / False   # OK: read as MUST_SAVE / PREFER_RECOMPUTE (backward compatibility)
    policy returns anything else  # not an error: every value but MUST_SAVE / PREFER_SAVE
                                  #     recomputes, the *_CPU_OFFLOAD ones included, as in torch 2.13

Example:
    >>> import functools, torch
    >>> from course.autograd.checkpoint import checkpoint
    >>> x = torch.randn(3, 3, requires_grad=True)
    >>> ctx_fn = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    >>> out = checkpoint(lambda t: (t @ t).sin().sum(), x, use_reentrant=False, context_fn=ctx_fn)
    >>> out.backward()
    >>> torch.allclose(x.grad, (x @ x).cos() @ x.T + x.T @ (x @ x).cos())
    True

From torch 2.15 on, an op with an ordered effect is saved whatever the policy says (but for
``MUST_RECOMPUTE``): backward replaying it would be seen. Earlier releases replay it, and the
course follows the torch it runs on.

Differences from torch: no ``torch.compile`` path (torch also tags FX nodes with the policy
and keys compiled regions apart); ``CheckpointPolicy`` is torch's own enum, so policies
written for torch run here unchanged. Three messages are ours and cut differently, with the
same facts and the same error types: a recomputation that meets an op the forward did not
run is one ``RuntimeError`` here (torch has two, "not found in storage" for an op never
cached and "invocation index ... not found" for one call too many); a second backward
through the region says what was consumed, where torch says "backward an extra time"; and a
bad op list is a ``ValueError`` that names the overload to use for an ``OpOverloadPacket``
and the type otherwise (torch puts both in one message).

Index: :func:`create_selective_checkpoint_contexts`, :class:`SelectiveCheckpointContext`,
``CheckpointPolicy``, ``SAC_IGNORED_OPS``.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.checkpoint import CheckpointPolicy

__all__ = [
    "CheckpointPolicy",
    "SAC_IGNORED_OPS",
    "SelectiveCheckpointContext",
    "create_selective_checkpoint_contexts",
]

# Ops neither cached nor counted: checkpoint itself adds detaches (more in the recomputation
# than in the forward), and the determinism check reads metadata through dispatch.
SAC_IGNORED_OPS = {torch.ops.aten.detach.default, torch.ops.prim.device.default} | set(
    FunctionalTensor.metadata_fns
)

_RECOMPUTE = object()  # storage entry: run the op again
_CONSUMED = object()  # storage entry: the cached output was handed out already

_SAVE = (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)
_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])  # (2, 13)


class SelectiveCheckpointContext:
    """What a policy function gets first: ``op_output`` (the op's result) and ``is_recompute``.

    The policy runs in the forward only, so ``is_recompute`` is always False (kept for
    policies that read it).

    Example:
        >>> ctx = SelectiveCheckpointContext(is_recompute=False, op_output=None)
        >>> ctx.is_recompute
        False
    """

    def __init__(self, *, is_recompute: bool, op_output: Any = None) -> None:
        self.is_recompute = is_recompute
        self.op_output = op_output


def _policy_from_bool(b: bool) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if b else CheckpointPolicy.PREFER_RECOMPUTE


def _is_cacheable_effect(op: Any) -> bool:
    """Is ``op`` an op with an ordered effect (one registered as such through torch's library,
    so running it twice would be seen) that the forward must save rather than let backward
    replay? torch 2.15's rule; c10d's collectives are left out (they return a Work handle, no
    value to cache). Before 2.15 torch replays such ops like any other, and so do we."""
    if _TORCH < (2, 15):
        return False
    from torch._higher_order_ops.effects import has_effects

    return has_effects(op) and op.namespace != "c10d"


class _VersionWrapper:
    """A cached output and its version counter then: reading it after an in-place change fails.

    ``unpack_hook``: the user's, when ``val`` is what the user's pack hook made of the output
    (NOTE [Cached outputs and the user's hooks]); reading applies it.
    """

    def __init__(self, val: Any, unpack_hook: Callable | None = None) -> None:
        self.val = val
        self.version = val._version if isinstance(val, torch.Tensor) else None
        self.unpack_hook = unpack_hook

    def get_val(self, allow_cache_entry_mutation: bool) -> Any:
        if self.version is not None and not allow_cache_entry_mutation and self.val._version != self.version:
            raise RuntimeError(
                "course.checkpoint: a tensor that selective checkpointing cached in forward was modified "
                "in place before backward used it (pass allow_cache_entry_mutation=True to allow it)"
            )
        return self.val if self.unpack_hook is None else self.unpack_hook(self.val)


# NOTE [Cached outputs and the user's hooks]
# The outputs a policy saves live in ``storage``, not on a graph node, so no saved-tensor hook
# sees them. From torch 2.14 on, ``checkpoint(..., respect_saved_tensors_hooks=...)`` decides:
# 1. True: each cached tensor goes through the user's pair (the top of the hook stack once the
#    checkpoint's own hooks are skipped): pack now, unpack when the recomputation reads it.
#       with save_on_cpu(): checkpoint(f, x, context_fn=..., respect_saved_tensors_hooks=True)
#                                         # yes: the cached mm output is packed by save_on_cpu
# 2. None (the default): bypassed, as in 2.13, with a FutureWarning when a user pair is active
#    (torch says the default will change); False: bypassed, silently.
# 3. Nothing changes without a user pair, or for outputs the policy recomputes.


def _current_user_saved_tensors_hooks() -> tuple[Callable, Callable] | None:
    """The pair a tensor saved now would meet, skipping checkpointing's own hooks (each
    remembers, while pushed, the pair below it in ``pack_hook._user_hooks``), or None."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
    while hooks is not None and getattr(hooks[0], "_checkpoint_internal", False):
        hooks = hooks[0]._user_hooks
    return hooks


def _user_hooks_for_cache(respect: bool | None) -> tuple[Callable, Callable] | None:
    """The user's pair the cache must go through, per NOTE [Cached outputs and the user's hooks]."""
    if _TORCH < (2, 14):
        return None
    hooks = _current_user_saved_tensors_hooks()
    if hooks is not None and respect is None:
        warnings.warn(
            "course.checkpoint: saved_tensors_hooks (save_on_cpu, say) are active around a selective "
            "checkpoint; the outputs its policy saves skip them today, and torch plans to send them "
            "through the hooks by default. Pass respect_saved_tensors_hooks=True or False to choose now.",
            FutureWarning,
            stacklevel=3,
        )
    return hooks if respect else None


def _cache(out: Any, respect: bool | None) -> Any:
    """``out`` as stored: each tensor detached, packed by the user's hooks where they apply."""
    hooks = _user_hooks_for_cache(respect)

    def wrap(x: Any) -> _VersionWrapper:
        x = _detach_helper(x)
        if hooks is not None and isinstance(x, torch.Tensor):
            return _VersionWrapper(hooks[0](x), unpack_hook=hooks[1])
        return _VersionWrapper(x)

    return tree_map(wrap, out)


def _detach_helper(x: Any) -> Any:
    # Detach with ADInplaceOrView on, so that a cached *view* keeps its version counter link
    # and, handed back in the recomputation, carries no autograd metadata (no cycle either).
    if isinstance(x, torch.Tensor):
        with torch._C._SetExcludeDispatchKeyGuard(torch._C.DispatchKey.ADInplaceOrView, False):
            x = x.detach()
    return x


class _CachingTorchDispatchMode(TorchDispatchMode):
    """The forward's mode: run each op, ask the policy, store its output or ``_RECOMPUTE``."""

    def __init__(self, policy_fn: Callable, storage: dict, ac_graph_id: Any = None) -> None:
        super().__init__()
        self.policy_fn = policy_fn
        self.storage = storage
        self.ac_graph_id = ac_graph_id  # torch's compile path reads it; kept for the same signature
        # set by checkpoint() from torch 2.14 on (NOTE [Cached outputs and the user's hooks])
        self.respect_saved_tensors_hooks: bool | None = None
        self.func_counter: defaultdict[Any, int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        policy = self.policy_fn(
            SelectiveCheckpointContext(is_recompute=False, op_output=out), func, *args, **kwargs
        )
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)
        if (
            policy not in _SAVE
            and policy is not CheckpointPolicy.MUST_RECOMPUTE
            and _is_cacheable_effect(func)
        ):
            policy = CheckpointPolicy.MUST_SAVE  # replaying an ordered effect would be seen: keep it
        if policy in _SAVE:
            self.storage[func][idx] = _cache(out, self.respect_saved_tensors_hooks)
        else:
            self.storage[func][idx] = _RECOMPUTE
        return out


class _CachedTorchDispatchMode(TorchDispatchMode):
    """The recomputation's mode: the i-th call of an op gets its cached output, or runs again."""

    def __init__(self, policy_fn: Any, storage: dict, allow_cache_entry_mutation: bool = False) -> None:
        # policy_fn is unused (the forward applied it), as in torch, which keeps it for subclasses
        super().__init__()
        self.storage = storage
        self.allow_cache_entry_mutation = allow_cache_entry_mutation
        self.func_counter: defaultdict[Any, int] = defaultdict(int)

    def __enter__(self):
        # Count from 0 in every recomputation: a second backward then meets _CONSUMED.
        self.func_counter.clear()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        entry = self.storage.get(func, {}).get(idx)
        if entry is None:
            raise RuntimeError(
                f"course.checkpoint: the recomputation called {func} (call {idx}) but the forward did not; "
                "the checkpointed region must run the same ops both times (no randomness in control flow, "
                "no global state that changed)"
            )
        if entry is _CONSUMED:
            raise RuntimeError(
                "course.checkpoint: a second backward through a selectively checkpointed region; its cached "
                "outputs were used by the first one, so only one backward is possible"
            )
        if entry is _RECOMPUTE:
            return func(*args, **kwargs)
        self.storage[func][idx] = _CONSUMED
        return tree_map(lambda x: x.get_val(self.allow_cache_entry_mutation), entry)


def create_selective_checkpoint_contexts(
    policy_fn_or_list: Callable | list, allow_cache_entry_mutation: bool = False
) -> tuple[_CachingTorchDispatchMode, _CachedTorchDispatchMode]:
    """The two contexts for ``checkpoint(..., context_fn=...)`` that apply a policy per op.

    Args:
        policy_fn_or_list: ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy`` (a
            bool is read as MUST_SAVE / PREFER_RECOMPUTE), or a list of ``OpOverload``\\ s
            to save (every other op is recomputed).
        allow_cache_entry_mutation: let a cached output be modified in place before backward.

    Returns:
        ``(forward mode, recomputation mode)``, sharing one storage.

    Raises:
        ValueError: a list entry that is not an ``OpOverload`` (or a higher-order op).
        TypeError: neither a callable nor a list.

    Example:
        >>> import torch
        >>> create_selective_checkpoint_contexts([torch.ops.aten.mm])
        Traceback (most recent call last):
        ...
        ValueError: course.checkpoint: the op list holds aten.mm, an OpOverloadPacket; name one overload of it, such as aten.mm.default
    """
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if isinstance(op, torch._ops.OpOverloadPacket):
                raise ValueError(
                    f"course.checkpoint: the op list holds {op}, an OpOverloadPacket; name one overload of it, "
                    f"such as {op}.default"
                )
            if not isinstance(op, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
                raise ValueError(
                    f"course.checkpoint: the op list holds {op} of type {type(op).__name__}, not an op"
                )
        ops = policy_fn_or_list

        def policy_fn(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op in ops else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("course.checkpoint: policy_fn_or_list takes a policy function or a list of ops")
    storage: defaultdict[Any, dict[int, Any]] = defaultdict(dict)
    return _CachingTorchDispatchMode(policy_fn, storage), _CachedTorchDispatchMode(
        None, storage, allow_cache_entry_mutation
    )
