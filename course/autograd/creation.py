"""Lesson 2: ``node_creation_hook``, a hook called on every autograd Node as it is made.

torch 2.14 added ``torch.autograd.graph.node_creation_hook(hook)``: inside the ``with``
block, every op that records a node calls ``hook(node)`` once, with the node complete
(``next_functions`` wired, ``_saved_*`` stored). Ours has the same name and contract::

    a = torch.ones(2, requires_grad=True)
    with node_creation_hook(lambda n: print(n.name())):
        b = (a * 2).sin()
    # torch::autograd::AccumulateGrad     # OK: a's leaf node, made when a is wired in
    # MulBackward0
    # SinBackward0                        # OK: creation order, inputs before users

    with node_creation_hook(outer), node_creation_hook(inner):
        a * 2                             # OK: outer(node), then inner(node)
    with node_creation_hook(lambda n: a * 3):
        a * 2                             # BAD: RuntimeError, a hook made a node

Nodes made during backward with ``create_graph=True`` fire too (the engine carries the
registration into its threads, as it carries grad mode). The use torch's docstring gives:
remember, when a node is made, which forward region made it, and read that back in the
node's backward hooks (lesson 02 does it).

How we see nodes being made (torch 2.13 has no such hook in its C++):

NOTE [Seeing nodes as they are made]
    1. A ``TorchDispatchMode`` sees every aten op, forward and backward, below autograd:
       when it runs, the op's node is already made but not yet on the outputs. So each
       op first *flushes*: it walks the nodes of its inputs and of the previous ops'
       outputs, then runs, then remembers its outputs for the next flush.
    2. A ``TorchFunctionMode`` flushes after each Python-level torch call returns (a view's
       output is a new tensor the dispatch mode never saw), and so does leaving the block.
       Outputs still without a node stay remembered (the last 64): an
       ``autograd.Function`` gives its outputs their node after its forward's ops ran.
    3. The walk is post-order through ``next_functions`` (inputs before users: creation
       order) and stops at nodes already reported (marked in ``node.metadata``) and at
       nodes made before the block (``node._sequence_nr()`` below the counter's value at
       entry). An AccumulateGrad has no number: on entry we mark those of the graphs
       alive then, found through the garbage collector (:func:`_mark_live_accumulate_grads`).
    4. A hook that makes a node moves the thread's sequence counter: we raise then.

Index: :class:`node_creation_hook`, :func:`_walk_new`, :func:`_mark_live_accumulate_grads`.

Differences from torch:

- we call the hook just after the op that made the node (at the next op or when the torch
  call returns), not inside it; the nodes and their order are the same (tests/test_node_creation_hook.py
  compares them with torch's on every program it has, but the one below).
- the last 64 outputs made with grad mode off live until 64 more are made (we may need to
  see them get an ``autograd.Function``'s node).
- a node keeps our mark in ``node.metadata`` (key :data:`_MARK`); torch's stays ``{}``.
- entering the outermost block scans the garbage collector's objects for live graphs
  (about 0.1 s in a lesson's process: use one block around a training step, not one per
  op); an AccumulateGrad alive then but held only by C++ (not
  by any Python object's graph) is reported on first use; torch reports only what it makes.
- an in-place op that saves a clone of its input (``c.mul_(b)`` keeps the old ``c`` for
  ``b``'s gradient) makes that clone's node after wiring in ``b``'s AccumulateGrad; we
  report the clone first. The same nodes, in another order.
- a hook that makes an interior node raises our RuntimeError after the hook returns;
  one that only touches a new leaf's AccumulateGrad is not caught. torch raises inside.
- the sequence counter is per thread: on CUDA, nodes made on the engine's device threads
  during backward are compared with another thread's counter; we test on the CPU, where
  backward runs on the calling thread.
- we use our own means on every torch; on 2.14 the tests compare them with torch's hook.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import deque
from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["node_creation_hook"]

#: The ``node.metadata`` key that says a node was already reported.
_MARK = "course.node_creation_hook"

_active = threading.local()  # .watcher: this thread's _Watcher while a block is open


def _sequence_nr() -> int:
    return torch._C._autograd._get_sequence_nr()


def _is_new(node, since: int) -> bool:
    if _MARK in node.metadata:
        return False
    seq = node._sequence_nr()
    return seq == 2**64 - 1 or seq >= since  # 2**64 - 1: AccumulateGrad's "no number"


def _walk_new(roots: list, since: int) -> list:
    """The nodes reachable from ``roots`` not reported yet, inputs before users.

    >>> a = torch.ones(2, requires_grad=True)
    >>> since = _sequence_nr()
    >>> [n.name() for n in _walk_new([(a * 2).exp().grad_fn], since)]
    ['torch::autograd::AccumulateGrad', 'MulBackward0', 'ExpBackward0']
    """
    order, stack = [], [(r, False) for r in reversed(roots) if r is not None]
    while stack:
        node, children_done = stack.pop()
        if not _is_new(node, since):
            continue
        if children_done:
            node.metadata[_MARK] = True
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((n, False) for n, _ in reversed(node.next_functions) if n is not None)
    return order


def _held(t: torch.Tensor) -> Callable:
    """A strong reference when grad mode is off (an autograd.Function's forward), else a weak one."""
    return weakref.ref(t) if torch.is_grad_enabled() else (lambda: t)


def _mark_live_accumulate_grads() -> None:
    """Mark the AccumulateGrads that exist already: those of the graphs alive now.

    An AccumulateGrad has no sequence number, and a leaf keeps its one (weakly) while a
    graph uses it, so without this a block would report a leaf node made long before.
    We find the live graphs through the garbage collector: every tensor with a
    ``grad_fn``, and every node object a program holds (a ``GradientEdge``'s).
    """
    seen, stack, kinds = set(), [], {}
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: some modules' objects warn when asked their __class__
        if kind not in kinds:
            kinds[kind] = issubclass(kind, torch.Tensor) or issubclass(kind, torch.autograd.graph.Node)
        if not kinds[kind]:
            continue
        node = obj.grad_fn if issubclass(kind, torch.Tensor) else obj
        if node is not None:
            stack.append(node)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node._sequence_nr() == 2**64 - 1:
            node.metadata[_MARK] = True
        stack.extend(n for n, _ in node.next_functions if n is not None)


def _grad_fns(values) -> list:
    return [t.grad_fn for t in tree_leaves(values) if isinstance(t, torch.Tensor) and t.grad_fn is not None]


class _Watcher:
    """One per thread: the open hooks (outermost first) and the two modes that feed them."""

    def __init__(self) -> None:
        self.hooks: list[tuple[Callable, int]] = []  # (hook, sequence counter at its entry)
        # Outputs of recent ops with no node yet (the last 64): an autograd.Function gives
        # its outputs a node only after its forward (run with grad off) returns, and the
        # caller may drop them at once, so those we hold; the rest weakly.
        self.pending: deque = deque(maxlen=64)
        self.calling = False
        self.modes = (_FunctionSide(self), _DispatchSide(self))

    def flush(self, *values) -> None:
        if self.calling or not self.hooks:
            return
        alive = [t for t in (ref() for ref in self.pending) if t is not None]
        self.pending = deque((_held(t) for t in alive if t.grad_fn is None), maxlen=64)
        roots = _grad_fns((alive, values))
        for node in _walk_new(roots, self.hooks[0][1]):
            self.report(node)

    def report(self, node) -> None:
        seq = node._sequence_nr()
        self.calling = True
        try:
            for hook, since in list(self.hooks):
                if seq == 2**64 - 1 or seq >= since:  # a node made before this block's entry: not its
                    before = _sequence_nr()
                    hook(node)
                    if _sequence_nr() != before:
                        raise RuntimeError(
                            f"node_creation_hook: the hook {getattr(hook, '__name__', hook)!r} made "
                            f"a new autograd node while looking at {node.name()}; a creation hook "
                            "may record, tag or hook the node it is given, not run ops that need grad"
                        )
        finally:
            self.calling = False


class _FunctionSide(TorchFunctionMode):
    def __init__(self, watcher: _Watcher) -> None:
        super().__init__()
        self.watcher = watcher

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.watcher.flush(out)
        return out


class _DispatchSide(TorchDispatchMode):
    def __init__(self, watcher: _Watcher) -> None:
        super().__init__()
        self.watcher = watcher

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.watcher.flush(args, kwargs)
        out = func(*args, **(kwargs or {}))
        if not self.watcher.calling:
            self.watcher.pending.extend(_held(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


class node_creation_hook:
    """Call ``hook(node)`` on every autograd Node made inside the ``with`` block.

    Args:
        hook: ``hook(node) -> None``; may record the node, write ``node.metadata``,
            or register hooks on it. It must not run ops that make nodes.

    Raises:
        RuntimeError: when the hook makes an autograd node.

    Example:
        >>> a = torch.ones(2, requires_grad=True)
        >>> names = []
        >>> with node_creation_hook(lambda node: names.append(node.name())):
        ...     b = a * 2
        >>> names
        ['torch::autograd::AccumulateGrad', 'MulBackward0']
    """

    def __init__(self, hook: Callable) -> None:
        self.hook = hook

    def __enter__(self) -> None:
        watcher = getattr(_active, "watcher", None)
        if watcher is None:
            _mark_live_accumulate_grads()
            watcher = _active.watcher = _Watcher()
            for mode in watcher.modes:
                mode.__enter__()
        watcher.flush()  # nodes made before this block belong to the outer hooks only
        watcher.hooks.append((self.hook, _sequence_nr()))

    def __exit__(self, *exc) -> None:
        watcher = _active.watcher
        try:
            if exc[0] is None:
                watcher.flush()
        finally:
            watcher.hooks.pop()
            if not watcher.hooks:
                for mode in reversed(watcher.modes):
                    mode.__exit__(None, None, None)
                _active.watcher = None
