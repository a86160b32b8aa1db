"""Lesson 2: hooks that watch several gradients at once, and hooks on the whole graph.

A tensor hook (``t.register_hook(fn)``) sees one gradient. ``register_multi_grad_hook``
builds, out of one tensor hook per tensor, a hook that sees a *group*:

- ``mode="all"``: ``fn(grads)`` runs once, after every gradient of the group that this
  backward will compute has arrived; ``grads[i]`` is None for a tensor this backward
  skips (not in the graph, or not needed for the ``inputs=`` you asked for).
- ``mode="any"``: ``fn(grad)`` runs once, with the first gradient of the group to arrive.

"Once" means once per *graph task*: one call to ``backward()`` or ``autograd.grad()``.
The engine numbers graph tasks (``torch._C._current_graph_task_id()``), and several may
run at the same time on different threads, so the state is a dict keyed by that id,
guarded by a lock::

    c = a * b
    register_multi_grad_hook((a, b, c), fn)
    c.sum().backward()                  # fn([ga, gb, gc])         # OK: one call
    c.sum().backward(inputs=(a,))       # fn([ga, None, gc])       # OK: b is not needed
    register_multi_grad_hook(a, fn)     # BAD: TypeError, pass (a,)

How does "all" know how many gradients to wait for? On the first gradient of a graph
task it asks the engine, for each tensor's node, ``torch._C._will_engine_execute_node``.

NOTE [Forgetting a graph task]. torch 2.13's ``mode="any"`` stores ``ran_hook[id] = True``
and never deletes it: one dict entry per backward, forever. We delete a graph task's
entry when the task ends, with ``Variable._execution_engine.queue_callback`` (a callback
the engine runs after the last node of the current graph task: the engine method behind
:func:`course.autograd.callbacks.queue_callback`, called directly so that a ``course.trace``
recording shows the hooks' events, not our bookkeeping). Behaviour is unchanged
because graph task ids are never reused. A backward that raises skips its final
callbacks, so in mode "any" it leaves its one entry behind (torch leaves every entry).

Like torch, mode "all" over a *leaf* fails under ``autograd.grad()``: the engine cannot
say whether a leaf's AccumulateGrad will run there (``_will_engine_execute_node`` raises
RuntimeError). We ask before storing anything, so that failed graph task leaves no state.

Index: :func:`register_multi_grad_hook`, :class:`_MultiHandle`,
:func:`iter_graph`, :func:`_register_logging_hooks_on_whole_graph`,
:func:`_engine_run_backward`.

What is ours and what is torch's: hooks run inside torch's C++ engine, which we call as
torch does (``Tensor.register_hook``, ``Node.register_prehook``, ``run_backward``). The
group logic of ``register_multi_grad_hook`` is torch's Python algorithm, re-written with
bounded per-graph-task state (below); the logging hooks and ``_engine_run_backward``
are annotated copies of torch's few lines.

Differences from torch:

- bounded state in both modes (see the NOTE); "all" also counts gradients per graph
  task (torch shares one ``nb_calls`` between concurrent graph tasks).
- clearer errors, same types: a single Tensor instead of a sequence raises TypeError
  (torch silently hooks the tensor's rows, which never fire); a non-tensor element
  raises AttributeError naming its index (torch: ``'int' object has no attribute
  'requires_grad'``); in mode "all" a tensor that does not require grad raises
  AssertionError naming its index (torch: ``Expected gradient function to be set``).
  Mode "any" skips such tensors, like torch.
- the logging hooks log to ``course.autograd.hooks`` and name nodes with :func:`node_repr`
  (``Executing: MulBackward0 ...``) where torch prints ``<MulBackward0 object at 0x...>``.
- when a ``course.trace`` recording is open, firing emits a ``hook`` event.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import torch
from torch.autograd.variable import Variable
from torch.utils.hooks import RemovableHandle

from course import trace
from course.autograd.graph import GradientEdge, Node, _get_grad_fn_or_grad_acc, node_repr, short_type

__all__ = ["iter_graph", "register_multi_grad_hook"]

log = logging.getLogger(__name__)


class _MultiHandle(RemovableHandle):
    """One handle for many: ``remove()`` removes every tensor hook we registered."""

    handles: tuple[RemovableHandle, ...]

    def __init__(self, handles: tuple[RemovableHandle, ...]) -> None:
        self.handles = handles

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    def __getstate__(self) -> tuple[RemovableHandle, ...]:
        return self.handles

    def __setstate__(self, state: tuple[RemovableHandle, ...]) -> None:
        self.handles = state


def _current_graph_task_id() -> int:
    id = torch._C._current_graph_task_id()  # -1 outside backward
    if id == -1:
        raise AssertionError("a multi-grad hook ran outside backward(): there is no graph task to count in")
    return id


def _forget_at_end_of_graph_task(id: int, lock: threading.Lock, *states: dict) -> None:
    """Drop ``id`` from every dict in ``states`` once the current graph task ends."""

    def forget() -> None:
        with lock:
            for state in states:
                state.pop(id, None)

    Variable._execution_engine.queue_callback(forget)


def _check_tensors(tensors: Any, mode: str) -> tuple[torch.Tensor, ...]:
    if isinstance(tensors, torch.Tensor):
        raise TypeError(
            "register_multi_grad_hook expects a sequence of Tensors, got a single Tensor; pass (t,)"
        )
    tensors = tuple(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise AttributeError(
                f"register_multi_grad_hook expects a sequence of Tensors, but tensors[{i}] is a {type(t).__name__}"
            )
        if mode == "all" and not t.requires_grad:
            raise AssertionError(
                f"register_multi_grad_hook(mode='all'): tensors[{i}] does not require grad, "
                "so no gradient will ever be computed for it"
            )
    return tensors


def register_multi_grad_hook(
    tensors: Sequence[torch.Tensor],
    fn: Callable[[Sequence[torch.Tensor | None]], None] | Callable[[torch.Tensor], None],
    *,
    mode: Literal["all", "any"] = "all",
) -> RemovableHandle:
    """Register a hook that fires once per backward for a group of tensors.

    Args:
        tensors: the tensors to watch (a sequence, not a single Tensor).
        fn: ``fn(grads)`` in mode "all" (a list, None where not computed);
            ``fn(grad)`` in mode "any" (the first gradient to arrive).
        mode: ``"all"`` or ``"any"``.

    Returns:
        A ``_MultiHandle``; ``handle.remove()`` unregisters every part of the hook.

    Raises:
        ValueError: unknown ``mode`` (torch's message).
        TypeError: ``tensors`` is a single Tensor.
        AttributeError: an element of ``tensors`` is not a Tensor.
        AssertionError: mode "all" and a tensor does not require grad.

    Example:
        >>> w = torch.ones(3, requires_grad=True)
        >>> x = torch.full((3,), 2.0, requires_grad=True)
        >>> y = w * x
        >>> unused = w + x                    # not on the path from y.sum() to w and x
        >>> handle = register_multi_grad_hook((w, x, y, unused), lambda gs: print([short_type(g) for g in gs]))
        >>> y.sum().backward(retain_graph=True)
        ['f32[3]', 'f32[3]', 'f32[3]', 'None']
        >>> y.sum().backward(inputs=(w,), retain_graph=True)    # x's grad is not asked for
        ['f32[3]', 'None', 'f32[3]', 'None']
        >>> handle.remove()
        >>> y.sum().backward(retain_graph=True)   # removed: nothing printed
    """
    supported_modes = ("all", "any")
    lock = threading.Lock()
    if mode not in supported_modes:
        # Conformance: torch's message (tests/test_hooks.py compares the two).
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    tensors = _check_tensors(tensors, mode)
    fn_name = getattr(fn, "__qualname__", type(fn).__name__)

    if mode == "all":
        count: dict[int, int] = {}  # graph task id -> gradients seen so far
        nb_calls: dict[int, int] = {}  # graph task id -> gradients this task will compute
        buffer: dict[int, list[torch.Tensor | None]] = {}  # graph task id -> grads
        grad_fns = list(map(_get_grad_fn_or_grad_acc, tensors))
        len_tensors = len(tensors)

        def get_inner_hook(idx: int) -> Callable[[torch.Tensor], None]:
            def inner_hook(grad: torch.Tensor) -> None:
                id = _current_graph_task_id()
                with lock:
                    if id not in count:  # first gradient of this graph task
                        # Ask first: it raises for a leaf under autograd.grad(), and then
                        # we have stored nothing.
                        nb_calls[id] = sum(map(torch._C._will_engine_execute_node, grad_fns))
                        count[id] = 0
                        buffer[id] = [None] * len_tensors
                        _forget_at_end_of_graph_task(id, lock, count, nb_calls, buffer)
                    curr_count = count[id]
                    count[id] = curr_count + 1
                    buffer[id][idx] = grad
                    grads = buffer[id] if curr_count == nb_calls[id] - 1 else None
                if grads is not None:  # the last expected gradient: fire, outside the lock
                    if trace.ACTIVE:
                        trace.emit(
                            "hook",
                            name="multi_grad_hook",
                            mode="all",
                            fn=fn_name,
                            computed=[g is not None for g in grads],
                        )
                    fn(grads)

            return inner_hook

        handles = tuple(t.register_hook(get_inner_hook(i)) for i, t in enumerate(tensors))
    else:
        ran_hook: dict[int, bool] = {}  # graph task id -> already fired

        @functools.wraps(fn)
        def wrapped_fn(grad: torch.Tensor) -> None:
            id = _current_graph_task_id()
            with lock:
                prev = ran_hook.get(id, False)
                if not prev:
                    ran_hook[id] = True
                    _forget_at_end_of_graph_task(id, lock, ran_hook)
            if prev:
                return
            if trace.ACTIVE:
                trace.emit("hook", name="multi_grad_hook", tensor=grad, mode="any", fn=fn_name)
            fn(grad)

        handles = tuple(t.register_hook(wrapped_fn) for t in tensors if t.requires_grad)

    return _MultiHandle(handles)


def iter_graph(roots: list[Node]) -> Iterator[Node]:
    """Breadth-first walk over every node reachable from ``roots``, each once.

    torch writes it inside ``_register_logging_hooks_on_whole_graph`` under the same name; we
    lift it to module level so a lesson can list what the logger hooks. A node is yielded once
    it is taken off the queue, after its next functions went on it.

    Example:
        >>> a = torch.ones(2, requires_grad=True)
        >>> [node_repr(n) for n in iter_graph([(a.exp() * a).sum().grad_fn])]
        ['SumBackward0', 'MulBackward0', 'ExpBackward0', 'AccumulateGrad(shape=(2,))']
    """
    seen: set[Node] = set()
    q: deque[Node] = deque()
    for node in roots:
        if node is not None:
            seen.add(node)
            q.append(node)
    while q:
        node = q.popleft()
        for fn, _ in node.next_functions:
            if fn in seen or fn is None:
                continue
            seen.add(fn)
            q.append(fn)
        yield node


def _register_logging_hooks_on_whole_graph(
    t_outputs: Sequence[torch.Tensor | GradientEdge],
) -> Callable[[], None]:
    """Put a pre-hook on every node behind ``t_outputs`` that logs it at DEBUG level.

    Each executed node logs ``Executing: MulBackward0 with grad_outputs: [f32[2, 3]]``.

    Returns:
        A function that removes every hook it registered.

    Example:
        >>> a = torch.ones(2, 3, requires_grad=True)
        >>> out = (a * 2).sum()
        >>> [node_repr(n) for n in iter_graph([out.grad_fn])]
        ['SumBackward0', 'MulBackward0', 'AccumulateGrad(shape=(2, 3))']
        >>> unregister = _register_logging_hooks_on_whole_graph([out])
        >>> unregister()
    """
    grad_fns = list(map(_get_grad_fn_or_grad_acc, t_outputs))

    def prehook(grad_outputs: Sequence[torch.Tensor | None]) -> None:
        node = torch._C._current_autograd_node()
        grad_outputs_str = f"[{','.join(short_type(t) for t in grad_outputs)}]"
        log.debug(f"Executing: {node_repr(node)} with grad_outputs: {grad_outputs_str}")

    handles = [node.register_prehook(prehook) for node in iter_graph(grad_fns)]

    def unregister_hooks() -> None:
        for handle in handles:
            handle.remove()

    return unregister_hooks


def _engine_run_backward(
    t_outputs: Sequence[torch.Tensor | GradientEdge],
    *args: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, ...]:
    """Call the C++ engine, as ``torch.autograd.backward`` and ``grad`` do.

    Arguments after ``t_outputs`` go to ``run_backward`` unchanged: ``grad_tensors,
    keep_graph, create_graph, inputs, allow_unreachable, accumulate_grad``. When the
    ``course.autograd.hooks`` logger is at DEBUG, every executed node is logged.

    Example:
        >>> a = torch.ones(2, requires_grad=True)
        >>> out = (a * 3).sum()
        >>> _engine_run_backward((out,), (torch.tensor(1.0),), False, False, (a,), False, False)
        (tensor([3., 3.]),)
    """
    attach_logging_hooks = log.getEffectiveLevel() <= logging.DEBUG
    if attach_logging_hooks:
        unregister_hooks = _register_logging_hooks_on_whole_graph(t_outputs)
    # Stash the context so that config is visible in the engine's device threads.
    torch._C._stash_obj_in_tls("context", contextvars.copy_context())
    try:
        return Variable._execution_engine.run_backward(t_outputs, *args, **kwargs)
    finally:
        if attach_logging_hooks:
            unregister_hooks()
        torch._C._remove_obj_from_tls("context")  # erase, not None: see torch's note
