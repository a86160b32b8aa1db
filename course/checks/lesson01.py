"""Checks for lesson 1, the autograd graph: Nodes, AccumulateGrad, gradient edges, versions.

Each exercise is registered once, here: its reference solution (what
solutions/01_autograd_graph.ipynb writes), the oracle (torch), visible and hidden cases, and
the known wrong answers with the hint each deserves. See docs/authoring.md.

The graphs of exercise 1.1 and the programs of exercise 1.3 (``GRAPHS``,
``INPLACE_PROGRAMS``) are lesson content, in ``course/content/lesson01.py``: the notebook
imports them from there and runs exactly what the check judges. A prediction's truth
(``_which_break`` and its runner ``_breaks_backward``, ``_version_program``) is private: no
notebook imports what would answer it.
"""

from __future__ import annotations

import collections
import sys
import warnings

import networkx as nx
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course.autograd.graph import get_gradient_edge, increment_version
from course.autograd.hooks import iter_graph
from course.checks import case, exercise, predict, wrong
from course.checks.solutions.lesson01 import bfs_names, pre_relu_grad, predicted_breaks, predicted_versions
from course.content.lesson01 import GRAPHS, INPLACE_PROGRAMS

# --- Exercise 1.1: walk the graph breadth first ----------------------------------------------


_LIBRARY_WALK = "walked the graph with course.autograd.hooks.iter_graph"


def _walk_graph(answer, graph):
    """The answer's names on a fresh graph; or, when the answer let lesson 2's iter_graph (the
    walk this exercise rebuilds) do the walking, that fact instead of its names."""
    root, used = GRAPHS[graph]().grad_fn, []
    previous = sys.getprofile()

    def watch(frame, event, arg):  # sees every Python call, generators resumed included
        if event == "call" and frame.f_code is iter_graph.__code__:
            used.append(True)

    sys.setprofile(watch)
    try:
        names = answer(root)
    finally:
        sys.setprofile(previous)
    return {_LIBRARY_WALK: True} if used else names


def _library_walk(root):
    return [node.name() for node in iter_graph([root])]


def _networkx_bfs(root):
    """The oracle of 1.1: networkx's breadth-first search over the graph as a DiGraph.

    An edge goes from a node to each of its next functions, in next_functions order (a
    DiGraph keeps its neighbours in insertion order, and ``bfs_edges`` visits them in that
    order); None edges are left out. The walk is networkx's, not ours.
    """
    graph, stack = nx.DiGraph(), [root]
    graph.add_node(root)
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is not None:
                if nxt not in graph:
                    stack.append(nxt)
                graph.add_edge(node, nxt)
    return [root.name()] + [v.name() for _, v in nx.bfs_edges(graph, root)]


def _depth_first(root):
    seen, names = set(), []

    def visit(node):
        seen.add(node)
        names.append(node.name())
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt not in seen:
                visit(nxt)

    visit(root)
    return names


def _forgets_none(root):
    seen, queue, names = {root}, collections.deque([root]), []
    while queue:
        node = queue.popleft()
        names.append(node.name())
        for nxt, _ in node.next_functions:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)  # None goes in too, and None.name() fails
    return names


def _no_seen_set(root):
    queue, names = collections.deque([root]), []
    while queue:
        node = queue.popleft()
        names.append(node.name())
        queue.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return names


def _seen_by_name(root):
    seen, queue, names = {root.name()}, collections.deque([root]), []
    while queue:
        node = queue.popleft()
        names.append(node.name())
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt.name() not in seen:
                seen.add(nxt.name())
                queue.append(nxt)
    return names


def _seen_when_popped(root):  # right, written differently: a node may wait twice in the queue
    seen, queue, names = set(), [root], []
    while queue:
        node = queue.pop(0)
        if node in seen:
            continue
        seen.add(node)
        names.append(node.name())
        queue += [nxt for nxt, _ in node.next_functions if nxt is not None]
    return names


def _type_names(root):
    # The right order, but the class names: 'AccumulateGrad' instead of its name().
    return [name.rsplit("::", 1)[-1] for name in bfs_names(root)]


exercise(
    "1.1",
    name="bfs_names",
    title="Walk the autograd graph breadth first",
    solution=bfs_names,
    oracle=_networkx_bfs,
    run=_walk_graph,
    points=2,
    cases=[case("mlp", label="the MLP loss of this lesson (GRAPHS['mlp'])")],
    hidden=[
        case("shared", label="h = w * 2; (h.sin() + h.cos()).sum(): one node feeds two"),
        case("unbind", label="a, b = w.unbind(); a * b + w.sum(): two edges to one node"),
        case("deep", label="three residual blocks h = h + h.tanh()"),
    ],
    wrong=[
        wrong(
            _depth_first,
            "that is depth-first order: you went down the first edge to the bottom before "
            "visiting the siblings. Breadth first uses a queue (collections.deque, popleft), "
            "so every node one edge from the root comes before any node two edges away.",
        ),
        wrong(
            _forgets_none,
            "next_functions holds (None, 0) where an input needs no gradient (x and y in the "
            "MLP); skip those edges instead of queueing None.",
        ),
        wrong(
            _no_seen_set,
            "a node reached along two paths (a shared input, both outputs of unbind) is one "
            "node: keep a set of the nodes you have queued and list each once.",
        ),
        wrong(
            _seen_by_name,
            "two different nodes can have the same name (two MmBackward0, three "
            "AccumulateGrad in the MLP): remember nodes by identity (a set of Node objects), "
            "not by name().",
        ),
        wrong(
            _library_walk,
            "the order is right, but iter_graph (the walk lesson 2's logger uses) did the "
            "walking: this exercise is that walk. Keep your own queue of nodes and your own "
            "set of nodes already queued.",
        ),
        wrong(
            _type_names,
            "the order is right, but list node.name(): for a leaf's node it is "
            "'torch::autograd::AccumulateGrad', not the class name 'AccumulateGrad'.",
        ),
    ],
    right=[_seen_when_popped],
    hint="breadth first means first in, first out: a queue. Every node is listed once, even "
    "when two paths reach it, and a None edge is an input that needs no gradient.",
)

# --- Exercise 1.2: the gradient at an edge, after an in-place op ----------------------------


def _pre_relu_oracle(x, W1, W2):
    a = x @ W1  # no in-place op: keep the pre-activation as its own tensor
    loss = (a.relu() @ W2).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, a)
    return grad


def _grad_of_z_after_relu(x, W1, W2):
    z = x @ W1
    z.relu_()
    loss = (z @ W2).pow(2).sum()
    (grad,) = torch.autograd.grad(loss, z)
    return grad


def _dot_grad_of_non_leaf(x, W1, W2):
    z = x @ W1
    z.relu_()
    (z @ W2).pow(2).sum().backward()
    with warnings.catch_warnings():  # torch warns that .grad of a non-leaf is not populated
        warnings.simplefilter("ignore")
        return z.grad


def _edge_of_the_leaf(x, W1, W2):
    z = x @ W1
    edge = get_gradient_edge(W1)
    z.relu_()
    (grad,) = torch.autograd.grad((z @ W2).pow(2).sum(), edge)
    return grad


class _InPlaceOps(TorchDispatchMode):
    """Counts the ops that write into a tensor (relu_, add_, ...) while it is entered."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func._schema.is_mutable
        return func(*args, **(kwargs or {}))


class _EdgeInputs:
    """Notes whether a backward pass run while it is entered was asked for the gradient at a
    GradientEdge (``torch.autograd.grad(loss, edge)``, or ``backward(inputs=[edge])``).

    Every Python route into the engine (``torch.autograd.grad``, ``.backward()``, however the
    answer imported them) goes through ``torch.autograd._engine_run_backward``; this wraps that
    name and reads its ``inputs`` argument (the fifth), then calls the real one unchanged.

    Example:
        >>> a = torch.ones(2, requires_grad=True)
        >>> with _EdgeInputs() as seen:
        ...     _ = torch.autograd.grad((a * 2).sum(), a)
        >>> seen.edge
        False
        >>> with _EdgeInputs() as seen:
        ...     _ = torch.autograd.grad((a * 2).sum(), get_gradient_edge(a))
        >>> seen.edge
        True
    """

    def __enter__(self):
        self.edge = False
        self._real = real = torch.autograd._engine_run_backward

        def watched(outputs, *args, **kwargs):
            inputs = kwargs.get("inputs", args[3] if len(args) > 3 else ())
            self.edge |= any(isinstance(i, torch.autograd.graph.GradientEdge) for i in inputs or ())
            return real(outputs, *args, **kwargs)

        torch.autograd._engine_run_backward = watched
        return self

    def __exit__(self, *exc):
        torch.autograd._engine_run_backward = self._real
        return False


def _pre_relu_run(answer, x, W1, W2):
    """The gradient (and whether it still holds a graph), whether the answer changed a tensor
    in place and took the gradient at a GradientEdge (the point of the exercise: the oracle
    needs neither to know the value), and the caller's weights' .grad afterwards (they should
    stay None)."""
    with _InPlaceOps() as writes, _EdgeInputs() as seen:
        grad = answer(x, W1, W2)
    return {
        "gradient": grad,
        "gradient requires grad": getattr(grad, "requires_grad", None),
        "relu applied in place": answer is _pre_relu_oracle or writes.count > 0,
        "gradient taken at a GradientEdge": answer is _pre_relu_oracle or seen.edge,
        "W1.grad after": W1.grad,
        "W2.grad after": W2.grad,
    }


def _no_in_place_op(x, W1, W2):
    """BAD for this exercise: the right value, with the pre-activation kept as its own tensor."""
    a = x @ W1
    return torch.autograd.grad((a.relu() @ W2).pow(2).sum(), a)[0]


def _grad_at_a_copy(x, W1, W2):
    """BAD for this exercise: relu_ runs on a copy, so the pre-activation keeps its tensor."""
    a = x @ W1
    z = a.clone()
    z.relu_()
    return torch.autograd.grad((z @ W2).pow(2).sum(), a)[0]


def _freezes_the_weights(x, W1, W2):
    grad = pre_relu_grad(x, W1, W2)
    W1.requires_grad_(False)  # BAD: "done with the weights", but they are the caller's
    W2.requires_grad_(False)
    return grad


def _keeps_its_graph(x, W1, W2):
    z = x @ W1
    edge = get_gradient_edge(z)
    z.relu_()
    return torch.autograd.grad((z @ W2).pow(2).sum(), edge, create_graph=True)[0]


def _backward_and_a_prehook(x, W1, W2):
    z = x @ W1
    edge = get_gradient_edge(z)
    z.relu_()
    got = []
    edge.node.register_prehook(lambda grad_outputs: got.append(grad_outputs[edge.output_nr]))
    (z @ W2).pow(2).sum().backward()  # right value, but fills W1.grad and W2.grad
    return got[0]


def _torch_edge(x, W1, W2):  # right, written differently: torch's get_gradient_edge
    z = torch.mm(x, W1)
    edge = torch.autograd.graph.get_gradient_edge(z)
    torch.relu_(z)
    return torch.autograd.grad([(z @ W2).square().sum()], [edge])[0]


def _weights(seed, n, d, h, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=dtype)
    W1 = torch.randn(d, h, generator=g, dtype=dtype).requires_grad_()
    W2 = torch.randn(h, 1, generator=g, dtype=dtype).requires_grad_()
    return x, W1, W2


exercise(
    "1.2",
    name="pre_relu_grad",
    title="The gradient at an edge, after the tensor changed in place",
    solution=pre_relu_grad,
    oracle=_pre_relu_oracle,
    run=_pre_relu_run,
    points=2,
    cases=[case(*_weights(0, 4, 3, 5), label="x (4, 3), W1 (3, 5), W2 (5, 1), from torch.randn with seed 0")],
    hidden=[
        case(*_weights(1, 8, 2, 6), label="8 samples, 2 features, 6 hidden units"),
        case(*_weights(2, 1, 4, 3, torch.float64), label="one float64 sample"),
    ],
    wrong=[
        wrong(
            _grad_of_z_after_relu,
            "after z.relu_() the name z stands for relu's output (its grad_fn is now "
            "ReluBackward0), so grad(loss, z) is the gradient after the relu. Take "
            "get_gradient_edge(z) before relu_: the edge still names MmBackward0's output.",
        ),
        wrong(
            _dot_grad_of_non_leaf,
            "z is not a leaf: backward() fills .grad only on leaves (unless you call "
            "z.retain_grad()), so z.grad is None. Ask for the gradient explicitly: "
            "torch.autograd.grad(loss, edge).",
        ),
        wrong(
            _edge_of_the_leaf,
            "get_gradient_edge(W1) is the edge into W1's AccumulateGrad: that gives "
            "d loss / d W1, shape (D, H). We want the edge of the non-leaf z = x @ W1.",
        ),
        wrong(
            _backward_and_a_prehook,
            "right gradient, but .backward() also wrote into W1.grad and W2.grad: the caller's "
            "weights now hold gradients nobody asked for. torch.autograd.grad(loss, edge) "
            "returns the gradient and leaves every .grad alone.",
        ),
        wrong(
            _no_in_place_op,
            "right value, but with relu out of place the pre-activation keeps its own tensor, "
            "and the exercise is gone: apply relu_ in place, as the spec says, and find the "
            "gradient at the place in the graph that the tensor no longer names.",
        ),
        wrong(
            _grad_at_a_copy,
            "right value, but relu_ ran on a copy: the clone gives the pre-activation back a "
            "tensor of its own (one more (N, H) buffer), and no gradient edge was used. In a "
            "model you do not write, the in-place op is inside someone else's forward and "
            "there is no copy to take: the edge is the one handle on that place in the graph. "
            "Take get_gradient_edge(z) before z.relu_() and hand the edge to torch.autograd.grad.",
        ),
        wrong(
            _freezes_the_weights,
            "right gradient, but W1 and W2 come back with requires_grad=False: the caller's "
            "model would stop training. Leave what you are handed as it was.",
        ),
        wrong(
            _keeps_its_graph,
            "create_graph=True returns a gradient that is itself part of a graph (it requires "
            "grad and keeps the whole graph alive); a plain gradient needs no create_graph.",
        ),
    ],
    right=[_torch_edge],
    hint="the gradient you want belongs to a place in the graph (the matmul's output), not to "
    "the tensor z, which relu_ changes: name that place before the in-place op, and ask "
    "autograd for the gradient there without touching any leaf's .grad.",
)

# --- Exercise 1.3: predict which in-place op breaks backward --------------------------------


def _breaks_backward(program) -> bool:
    """Run ``y = program(x)`` and ``y.sum().backward()``; True if backward fails because a
    saved tensor was modified in place (any other error propagates)."""
    x = torch.ones(3, requires_grad=True)
    try:
        program(x).sum().backward()
    except RuntimeError as e:
        if "modified by an inplace operation" in str(e):
            return True
        raise
    return False


def _which_break():
    return {key: _breaks_backward(program) for key, program in INPLACE_PROGRAMS.items()}


_RIGHT_BREAKS = {
    "exp_add": True,  # ExpBackward0 saved its result, which add_ changes
    "double_add": False,  # multiplying by a constant saves no tensor that needs x's grad
    "sigmoid_mul": True,  # SigmoidBackward0 saved its result, which mul_ changes
    "sin_add": False,  # SinBackward0 saved its input x, not its result
    "sin_input_add": True,  # SinBackward0 saved its input a, which add_ then changes
}

predict(
    "1.3",
    name="predicted_breaks",
    title="Predict which in-place op breaks backward",
    truth=_which_break,
    solution=predicted_breaks,
    wrong=[
        wrong(
            dict.fromkeys(_RIGHT_BREAKS, True),
            "an in-place op is harmless to backward unless it changes a tensor some node "
            "saved: x * 2 saves nothing of y, and sin saves its input, not its output.",
        ),
        wrong(
            dict.fromkeys(_RIGHT_BREAKS, False),
            "backward checks the version of every tensor a node saved: exp and sigmoid save "
            "their output y, so y.add_ / y.mul_ changes a saved tensor and backward refuses.",
        ),
        wrong(
            {**_RIGHT_BREAKS, "sin_add": True},
            "sin's derivative is cos(x), so SinBackward0 saves its input x, not its output: "
            "changing y in place is fine (look at y.grad_fn._saved_self).",
        ),
        wrong(
            {**_RIGHT_BREAKS, "sigmoid_mul": False},
            "sigmoid's derivative is sigmoid(x) * (1 - sigmoid(x)): SigmoidBackward0 saves its "
            "output y (look at y.grad_fn._saved_result), so y.mul_(2) changes a saved tensor.",
        ),
        wrong(
            {**_RIGHT_BREAKS, "sin_input_add": False},
            "the saved tensor need not be the output: SinBackward0 saved its input a, and "
            "a.add_(1) bumps a's version, so backward refuses.",
        ),
    ],
    right=[{key: int(breaks) for key, breaks in reversed(_RIGHT_BREAKS.items())}],  # 1 for True
    hint="for each op ask: which tensor did its backward node save (its input, its output, "
    "nothing)? Backward fails only if that tensor was changed in place afterwards.",
)

# --- Exercise 1.4: predict the version counters ---------------------------------------------


def _version_program():
    """The program of exercise 1.4, run by torch: the counters of a tensor, a view, a copy."""
    t = torch.zeros(3)
    t.add_(1)
    u = t[:2]  # a view
    u.mul_(2)
    v = t * 1
    with torch.no_grad():
        t.zero_()
    increment_version(v)
    return (t._version, u._version, v._version)


predict(
    "1.4",
    name="predicted_versions",
    title="Predict the version counters of a tensor, its view and a copy",
    truth=_version_program,
    solution=predicted_versions,
    right=[[3, 3, 1], torch.tensor([3, 3, 1])],
    wrong=[
        wrong(
            (2, 1, 1),
            "a view shares its base's version counter: u.mul_(2) bumps t too, and "
            "t.zero_() bumps u (they are the same memory).",
        ),
        wrong(
            (2, 2, 1),
            "torch.no_grad() stops recording the graph, not version counting: t.zero_() "
            "still bumps the counter.",
        ),
        wrong(
            (3, 3, 3),
            "t * 1 is a new tensor with its own counter, starting at 0; only increment_version(v) bumps it.",
        ),
        wrong(
            (3, 3, 0),
            "increment_version(v) bumps v's counter by one, just like an in-place op would.",
        ),
        wrong(
            (4, 4, 1),
            "making a view (t[:2]) does not change the memory, so it does not bump the counter.",
        ),
        wrong(
            torch.tensor([True, True, True]),
            "a version counter is a count (an int), not a yes/no: write three ints.",
        ),
    ],
    hint="count the in-place ops (add_, mul_, zero_) and increment_version calls that touch "
    "each tensor's memory; a view shares its base's counter, a new tensor starts at 0.",
)
