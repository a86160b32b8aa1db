"""Does course's queue_callback run callbacks when, where and in the order torch's does?

The oracle is torch: ``torch.autograd.graph.queue_callback`` where the installed torch has it
(2.15), the engine's own ``Variable._execution_engine.queue_callback`` on 2.13 and 2.14 (the
call torch 2.15's makes). Each program runs once with the oracle and once with the course's
and logs node pre-hooks, tensor hooks, post-accumulate hooks, the callbacks and the moment
``backward()`` returns; the logs, the threads, the gradients and the errors must agree.
"""

from __future__ import annotations

import threading

import pytest
import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version
from torch.autograd.variable import Variable

from course import autograd_graph as cg
from course import trace
from course.autograd import callbacks

pytestmark = pytest.mark.lesson02

TORCH_HAS_IT = hasattr(tg, "queue_callback")
ORACLE = tg.queue_callback if TORCH_HAS_IT else Variable._execution_engine.queue_callback
QUEUES = {"torch": ORACLE, "course": cg.queue_callback}


def both(program, *args):
    """program(queue_callback, *args) through torch's and the course's; both results."""
    return program(ORACLE, *args), program(cg.queue_callback, *args)


def outcome(run):
    """("ok", result) or (exception type name, message) of ``run()``."""
    try:
        return "ok", run()
    except Exception as e:  # noqa: BLE001 - we compare whatever is raised
        return type(e).__name__, str(e)


def test_is_queue_callback_in_torch_from_215_only():
    assert TORCH_HAS_IT == (Version(torch.__version__).release >= (2, 15))


def test_is_it_the_facades_name_from_its_own_module():
    assert cg.queue_callback is callbacks.queue_callback
    assert "queue_callback" in cg.__all__


# ---------------------------------------------------------------------- when callbacks run


def logged_backward(queue):
    """Node pre-hooks, a tensor hook that queues three callbacks (one queues a fourth), x's
    post-accumulate hook, and the return of backward(), in the order they happen."""
    log = []
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.exp().sum()
    for node in (z.grad_fn, z.grad_fn.next_functions[0][0], y.grad_fn):
        name = node.name()
        node.register_prehook(lambda grad_outputs, name=name: log.append(f"node {name}"))

    def hook(grad):
        log.append("tensor hook on y")
        queue(lambda: log.append("callback 1"))
        queue(lambda: (log.append("callback 2"), queue(lambda: log.append("callback 4, queued by 2"))))
        queue(lambda: log.append("callback 3"))

    y.register_hook(hook)
    x.register_post_accumulate_grad_hook(lambda p: log.append(f"x.grad filled: {p.grad.tolist()}"))
    z.backward()
    log.append("backward returned")
    return log


def test_do_callbacks_run_after_every_node_in_queueing_order_before_backward_returns():
    theirs, ours = both(logged_backward)
    assert ours == theirs
    filled = [i for i, line in enumerate(ours) if line.startswith("x.grad filled")]
    assert filled and filled[-1] < ours.index("callback 1")
    assert ours[-5:] == [
        "callback 1",
        "callback 2",
        "callback 3",
        "callback 4, queued by 2",
        "backward returned",
    ]


def twice_queued_and_retained(queue):
    """The same callback queued twice; then a second backward of the retained graph."""
    log = []
    x = torch.ones(2, requires_grad=True)
    y = x * 3

    def note():
        log.append("callback")

    handle = y.register_hook(lambda g: (queue(note), queue(note)) and None)
    y.sum().backward(retain_graph=True)
    log.append("first backward returned")
    handle.remove()
    y.sum().backward()  # a new graph task: its list starts empty
    log.append("second backward returned")
    return log


def test_does_a_callback_queued_twice_run_twice_and_only_in_its_own_backward():
    theirs, ours = both(twice_queued_and_retained)
    assert (
        ours
        == theirs
        == [
            "callback",
            "callback",
            "first backward returned",
            "second backward returned",
        ]
    )


class Queues(torch.autograd.Function):
    """A custom Function whose backward queues a callback (DDP's _DDPSink does this)."""

    @staticmethod
    def forward(ctx, x, queue, log):
        ctx.queue, ctx.log = queue, log
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        ctx.log.append("Queues.backward")
        ctx.queue(lambda: ctx.log.append("callback from Queues.backward"))
        return grad, None, None


def from_every_kind_of_hook(queue):
    log = []
    x = torch.ones(2, requires_grad=True)
    y = Queues.apply(x, queue, log)
    z = y * 2
    z.grad_fn.register_prehook(lambda go: queue(lambda: log.append("callback from a node pre-hook")))
    z.grad_fn.register_hook(lambda gi, go: queue(lambda: log.append("callback from a node post-hook")))
    x.register_post_accumulate_grad_hook(
        lambda p: queue(lambda: log.append("callback from a post-accumulate hook"))
    )
    z.sum().backward()
    return log


def test_can_every_kind_of_hook_and_a_custom_functions_backward_queue_one():
    theirs, ours = both(from_every_kind_of_hook)
    assert ours == theirs
    assert ours == [
        "Queues.backward",
        "callback from a node pre-hook",
        "callback from a node post-hook",
        "callback from Queues.backward",
        "callback from a post-accumulate hook",
    ]


def under_autograd_grad(queue):
    log = []
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: queue(lambda: log.append(f"callback, x.grad is {x.grad}")))
    (gx,) = torch.autograd.grad(y.sum(), x)
    log.append(f"grad returned {gx.tolist()}")
    return log


def test_does_autograd_grad_run_its_callbacks_too():
    theirs, ours = both(under_autograd_grad)
    assert ours == theirs == ["callback, x.grad is None", "grad returned [3.0, 3.0]"]


def nested_backward(queue):
    """A hook that runs a backward of its own: each graph task runs its own list."""
    log = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2

    def outer_hook(grad):
        queue(lambda: log.append("outer callback"))
        with torch.enable_grad():
            inner = torch.ones(2, requires_grad=True)
            w = inner * 3
            w.register_hook(lambda g: queue(lambda: log.append("inner callback")))
            w.sum().backward()
        log.append("inner backward returned")

    y.register_hook(outer_hook)
    y.sum().backward()
    log.append("outer backward returned")
    return log


def test_does_a_nested_backward_run_its_own_callbacks_when_it_ends():
    theirs, ours = both(nested_backward)
    assert ours == theirs
    assert ours == ["inner callback", "inner backward returned", "outer callback", "outer backward returned"]


def grad_mode_in_callback(queue, create_graph):
    seen = []
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.register_hook(
        lambda g: queue(
            lambda: seen.append((torch.is_grad_enabled(), torch._C._current_graph_task_id() != -1))
        )
    )
    if create_graph:
        (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    else:
        y.sum().backward()
    return seen


@pytest.mark.parametrize("create_graph", [False, True])
def test_does_a_callback_run_inside_the_graph_task_under_its_grad_mode(create_graph):
    theirs, ours = both(grad_mode_in_callback, create_graph)
    assert ours == theirs == [(create_graph, True)]


# ---------------------------------------------------------------------------- which thread


def thread_of_callback(queue):
    """Backward on a thread of its own: which thread runs the callback?"""
    seen = {}

    def run():
        x = torch.ones(2, requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: queue(lambda: seen.setdefault("callback", threading.get_ident())))
        y.sum().backward()
        seen["caller"] = threading.get_ident()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return seen["callback"] == seen["caller"], seen["caller"] != threading.get_ident()


def test_does_the_callback_run_on_the_thread_that_ran_backward():
    theirs, ours = both(thread_of_callback)
    assert ours == theirs == (True, True)


def two_threads_at_once(queue):
    """Two threads run a backward each, at the same time: each gets its own callbacks."""
    barrier = threading.Barrier(2)
    got = {}

    def run(name):
        x = torch.ones(2, requires_grad=True)
        y = x * 2

        def hook(grad):
            barrier.wait(timeout=10)  # both graph tasks are running now
            queue(lambda: got.setdefault(name, []).append(threading.current_thread().name))

        y.register_hook(hook)
        y.sum().backward()

    workers = [threading.Thread(target=run, args=(n,), name=n) for n in ("first", "second")]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return got


def test_do_two_concurrent_backwards_keep_their_callbacks_apart():
    theirs, ours = both(two_threads_at_once)
    assert ours == theirs == {"first": ["first"], "second": ["second"]}


# ---------------------------------------------------------------------------------- errors


def outside_backward(queue):
    return outcome(lambda: queue(lambda: None))[0]


def in_forward(queue):
    class Forward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            queue(lambda: None)
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad

    return outcome(lambda: Forward.apply(torch.ones(2, requires_grad=True)))[0]


@pytest.mark.parametrize("program", [outside_backward, in_forward])
def test_does_queueing_outside_a_backward_raise_runtime_error(program):
    theirs, ours = both(program)
    assert ours == theirs == "RuntimeError"


def test_does_the_course_say_where_to_call_it():
    with pytest.raises(RuntimeError, match="from a hook or a custom Function's backward"):
        cg.queue_callback(lambda: None)


def raising_callback(queue):
    log = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2

    def boom():
        raise ValueError("the callback failed")

    y.register_hook(
        lambda g: (
            (queue(lambda: log.append("before")), queue(boom), queue(lambda: log.append("after"))) and None
        )
    )
    result = outcome(lambda: y.sum().backward())
    return result, log, x.grad.tolist()


def test_does_an_exception_in_a_callback_stop_the_rest_and_leave_backward():
    theirs, ours = both(raising_callback)
    assert ours == theirs == (("ValueError", "the callback failed"), ["before"], [2.0, 2.0])


class Fails(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, queue, log):
        ctx.queue, ctx.log = queue, log
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        ctx.queue(lambda: ctx.log.append("callback of the failed backward"))
        raise KeyError("backward failed")


def failing_backward(queue):
    log = []
    x = torch.ones(2, requires_grad=True)
    result = outcome(lambda: Fails.apply(x, queue, log).sum().backward())
    y = x * 2
    y.register_hook(lambda g: queue(lambda: log.append("callback of the next backward")))
    y.sum().backward()
    return result[0], log


def test_does_a_backward_that_raises_drop_its_callbacks():
    theirs, ours = both(failing_backward)
    assert ours == theirs == ("KeyError", ["callback of the next backward"])


def not_callable(queue):
    """queue(report()) instead of queue(report): None is queued."""
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: queue(None))
    return outcome(lambda: y.sum().backward())[0], x.grad


def test_is_a_callback_that_cannot_be_called_a_type_error_in_both():
    (theirs, their_grad), (ours, our_grad) = both(not_callable)
    assert theirs == ours == "TypeError"
    # The difference the module states: torch raises once every node ran (x.grad is filled),
    # ours at once, inside the hook, before x's AccumulateGrad.
    assert their_grad.tolist() == [2.0, 2.0] and our_grad is None


# ------------------------------------------------------------------ any tree of callbacks

#: a callback tree: each item is (label, children), children queued by that callback.
trees = st.recursive(
    st.just(()),
    lambda children: st.lists(children, max_size=3).map(tuple),
    max_leaves=8,
)


def run_tree(queue, roots):
    log = []

    def make(path, children):
        def callback():
            log.append(path)
            for i, child in enumerate(children):
                queue(make(f"{path}.{i}", child))

        return callback

    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: [queue(make(str(i), tree)) for i, tree in enumerate(roots)] and None)
    y.sum().backward()
    return log


@settings(max_examples=40, deadline=None)
@given(st.lists(trees, min_size=1, max_size=3))
def test_does_any_tree_of_callbacks_run_in_torchs_order(roots):
    theirs, ours = both(run_tree, roots)
    assert ours == theirs


# ------------------------------------------------------------------------------ the trace


def test_does_a_recording_see_queued_and_ran():
    x = torch.ones(2, requires_grad=True)
    y = x * 2

    def report():
        pass

    y.register_hook(lambda g: cg.queue_callback(report))
    with trace.record() as events:
        y.sum().backward()
    assert [str(e) for e in events] == [
        "callback test_does_a_recording_see_queued_and_ran.<locals>.report at=queued",
        "callback test_does_a_recording_see_queued_and_ran.<locals>.report at=ran",
    ]
