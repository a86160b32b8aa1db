"""Lesson 2: run code once, when the whole backward is over, with ``queue_callback``.

Every hook so far runs *inside* backward, at one tensor or one node. Some work has to wait
for all of them: add up the gradient norms of every parameter, or start one reduction over
every bucket of gradients. ``queue_callback(fn)``, called while a backward runs, hands
``fn`` to the engine, which calls ``fn()`` after the last node of that backward and before
``backward()`` (or ``autograd.grad()``) returns::

    t.register_hook(lambda g: queue_callback(report))   # OK: queued from a hook
    loss.backward()          # ... nodes and hooks ..., then report(), then it returns
    queue_callback(report)   # BAD: RuntimeError, no backward is running on this thread
    t.register_hook(lambda g: queue_callback(report()))  # BAD: queues report's result

NOTE [When a final callback runs]. The engine keeps one list of callbacks on each graph
task (one ``backward()`` or ``autograd.grad()`` call, lesson 2's "once per graph task"):

1. Queueing appends to the list of the graph task the calling thread is running: from a
   tensor hook, a node hook, a custom Function's ``backward``, or another callback (yes).
   With no graph task on the thread it raises RuntimeError (no: at top level, in forward).
2. The list runs after the task's last node (every ``AccumulateGrad`` included), on the
   thread that ran the task (on the CPU, the thread that called ``backward()``), before
   ``backward()`` returns, under the backward's grad mode (on only with ``create_graph``).
3. In queueing order; a callback queued twice runs twice; a callback queued by a callback
   runs in the same pass, after the ones queued before it.
4. Each graph task has its own list: a second ``backward(retain_graph=True)`` starts empty,
   and a ``backward()`` called inside a hook runs its own list when *it* ends, before the
   outer one goes on.
5. Only on success: when a node or hook raises, the task's list is dropped. When a callback
   raises, the ones after it are dropped and ``backward()`` raises that exception (the
   gradients are already in ``.grad``).

Example, the order of hooks and callbacks in one backward:

    >>> import torch
    >>> log = []
    >>> w = torch.ones(2, requires_grad=True)
    >>> y = w * 3
    >>> def hook(grad):
    ...     log.append("hook on y")
    ...     queue_callback(lambda: log.append("first callback"))
    ...     queue_callback(lambda: queue_callback(lambda: log.append("queued by a callback")))
    >>> handle = y.register_hook(hook)
    >>> _ = w.register_post_accumulate_grad_hook(lambda p: log.append("w.grad filled"))
    >>> y.sum().backward()
    >>> log
    ['hook on y', 'w.grad filled', 'first callback', 'queued by a callback']
    >>> queue_callback(print)
    Traceback (most recent call last):
    ...
    RuntimeError: queue_callback needs a running backward pass on this thread: ...

Index: :func:`queue_callback`.

What is ours and what is torch's: the list and the moment it runs are torch's C++ engine
(``GraphTask.final_callbacks_``, run in ``exec_post_processing``). torch 2.15's
``torch.autograd.graph.queue_callback`` is one call of the engine's own
``Variable._execution_engine.queue_callback``; ours makes the same call on every release,
so it also works on torch 2.13 and 2.14, whose engine has that method but whose
``torch.autograd.graph`` has no ``queue_callback``.

Differences from torch:

- we check before we queue, and fail with the same exception types but sooner and with a
  message that says what to do: outside a backward, RuntimeError naming where to call it
  (torch's engine raises RuntimeError too); a ``callback`` that cannot be called (``None``,
  the result of ``report()``) raises TypeError at once, inside the hook, so the rest of that
  backward does not run (torch queues it, runs every node, then raises TypeError when it
  calls it).
- when a ``course.trace`` recording is open, queueing emits a ``callback`` event with
  ``at=queued`` and running it one with ``at=ran`` (torch has no such trace).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.variable import Variable

from course import trace

__all__ = ["queue_callback"]


def _traced(callback: Callable[[], None], name: str) -> Callable[[], None]:
    """``callback`` that emits a ``callback ... at=ran`` event before it runs."""

    def run() -> None:
        if trace.ACTIVE:
            trace.emit("callback", name=name, at="ran")
        callback()

    return run


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` once the backward pass running on this thread has finished.

    Args:
        callback: a function of no arguments; what it returns is ignored.

    Raises:
        TypeError: ``callback`` cannot be called.
        RuntimeError: no backward pass is running on this thread (at top level, in forward).

    Example:
        >>> import torch
        >>> x = torch.ones(3, requires_grad=True)
        >>> _ = x.register_hook(lambda g: queue_callback(lambda: print("x.grad is", x.grad)))
        >>> (x * 2).sum().backward()
        x.grad is tensor([2., 2., 2.])
    """
    if not callable(callback):
        raise TypeError(
            f"queue_callback expects a function to call later, got {type(callback).__name__}: "
            "pass the function itself (report), not the result of calling it (report())"
        )
    # -1: this thread runs no graph task, so the engine has no list to append to.
    if torch._C._current_graph_task_id() == -1:
        raise RuntimeError(
            "queue_callback needs a running backward pass on this thread: call it from a hook "
            "or a custom Function's backward, not at top level"
        )
    if trace.ACTIVE:
        name = getattr(callback, "__qualname__", type(callback).__name__)
        trace.emit("callback", name=name, at="queued")
        callback = _traced(callback, name)
    Variable._execution_engine.queue_callback(callback)
