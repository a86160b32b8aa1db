"""Does course's node_creation_hook see the nodes torch 2.14's sees, in the same order?

Two oracles. Where torch has the hook (2.14), the same program runs under torch's and under
ours and the nodes seen are compared: names, what they point to, order, nesting. On every
torch, an independent oracle: the graph walked from the program's outputs after the fact,
each node made inside the block exactly once, interior nodes in the order of their
sequence numbers (the engine's own creation counter), every node after its inputs' nodes.
"""

from __future__ import annotations

import threading

import pytest
import torch
import torch.autograd.graph as TG
from hypothesis import given, settings
from hypothesis import strategies as st

from course.autograd_graph import node_creation_hook

pytestmark = pytest.mark.lesson02

HAS_TORCH_HOOK = hasattr(TG, "node_creation_hook")
needs_torch_hook = pytest.mark.skipif(
    not HAS_TORCH_HOOK, reason=f"torch {torch.__version__} has no node_creation_hook (added in 2.14)"
)
IMPLEMENTATIONS = [pytest.param(node_creation_hook, id="course")] + (
    [pytest.param(TG.node_creation_hook, id="torch")] if HAS_TORCH_HOOK else []
)
NO_NUMBER = 2**64 - 1  # an AccumulateGrad's sequence number


def describe(node) -> tuple:
    """What a hook can see of a node: its name, its inputs' nodes, what it saved."""
    nexts = tuple(n.name() if n is not None else None for n, _ in node.next_functions)
    saved = tuple(sorted(k for k in dir(node) if k.startswith("_saved_")))
    return node.name(), nexts, saved


def seen_by(hook_cm, program, *args):
    """Run ``program(*args)`` under ``hook_cm``; return (descriptions, outputs).

    The hook keeps descriptions, not nodes: holding a leaf's AccumulateGrad would keep it
    alive, and the next graph would reuse it instead of making a new one."""
    seen = []
    with hook_cm(lambda node: seen.append(describe(node))):
        outs = program(*args)
    return seen, outs


def nodes_seen_by(hook_cm, program, *args):
    """Like :func:`seen_by`, keeping the nodes themselves (for the walk's oracle)."""
    nodes = []
    with hook_cm(nodes.append):
        outs = program(*args)
    return nodes, outs


def leaves():
    torch.manual_seed(0)
    return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _in_place(a, b):
    c = a.clone()
    c.mul_(b)
    c.add_(1)
    return [c]


def _linear(a, b):
    lin = torch.nn.Linear(3, 2)
    return [torch.nn.functional.mse_loss(lin(a * b).relu(), torch.zeros(2))]


PROGRAMS = {
    "mul_sin_sum": lambda a, b: [(a * b).sin().sum()],
    "views": lambda a, b: [a.view(3), *b.unbind(0), (a + b)[1:], a.unsqueeze(0).t()],
    "in_place": _in_place,
    "autograd_function": lambda a, b: [Double.apply(a) + b],
    "linear_relu_mse": _linear,
    "one_leaf_twice": lambda a, b: [a * a, a.exp()],
    "grad_off_inside": lambda a, b: [torch.no_grad()(lambda: a * 2)(), b.cos()],
}


def walked_from(outs, since: int) -> list:
    """The oracle: every node reachable from ``outs`` made after ``since``, and the leaves'
    AccumulateGrads, found after the fact (through ``next_functions`` and saved tensors)."""
    found, stack = {}, [t.grad_fn for t in outs if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        key = (node.name(), node._sequence_nr(), id(node))
        if node._sequence_nr() != NO_NUMBER and node._sequence_nr() < since or key in found:
            continue
        found[key] = node
        stack.extend(n for n, _ in node.next_functions if n is not None)
        for name in dir(node):  # a node saved for backward (an in-place op's clone of its input)
            saved = getattr(node, name) if name.startswith("_saved_") else None
            if isinstance(saved, torch.Tensor) and saved.grad_fn is not None:
                stack.append(saved.grad_fn)
    return list(found.values())


def assert_matches_the_walk(nodes, outs, since):
    """Ours saw exactly the walked nodes, each once, every node after its inputs' nodes?

    (Not "in sequence-number order": torch numbers an in-place op's node before the clone
    of the input it saves, and finishes the clone first.)"""
    walked = walked_from(outs, since)
    assert sorted(map(id, nodes)) == sorted(map(id, walked))  # the same objects: both hold them
    position = {id(n): i for i, n in enumerate(nodes)}
    for node in nodes:
        for child, _ in node.next_functions:
            if child is not None and id(child) in position:
                assert position[id(child)] < position[id(node)], (child.name(), node.name())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_does_ours_see_the_walked_graph_in_creation_order(name):
    since = torch._C._autograd._get_sequence_nr()
    nodes, outs = nodes_seen_by(node_creation_hook, PROGRAMS[name], *leaves())
    assert nodes, "every program makes nodes"
    assert_matches_the_walk(nodes, outs, since)


# NOTE in course/autograd/creation.py: an in-place op that saves a clone of its input.
SAME_NODES_OTHER_ORDER = {"in_place"}


@needs_torch_hook
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_does_ours_see_what_torchs_sees(name):
    theirs, _ = seen_by(TG.node_creation_hook, PROGRAMS[name], *leaves())
    ours, _ = seen_by(node_creation_hook, PROGRAMS[name], *leaves())
    if name in SAME_NODES_OTHER_ORDER:
        assert ours != theirs and sorted(ours) == sorted(theirs)
    else:
        assert ours == theirs


UNARY = ["sin", "exp", "relu", "sum", "t", "clone", "neg"]
BINARY = ["add", "mul", "sub"]


def run_ops(ops, a, b):
    x = a
    for op in ops:
        if op in BINARY:
            x = getattr(x, op)(b if x.dim() == 1 else b.sum())
        elif op == "t":
            x = x.t() if x.dim() == 2 else x.unsqueeze(0).t()
        else:
            x = getattr(x, op)()
    return [x]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(UNARY + BINARY), min_size=1, max_size=8))
def test_random_chains_against_both_oracles(ops):
    since = torch._C._autograd._get_sequence_nr()
    nodes, outs = nodes_seen_by(node_creation_hook, run_ops, ops, *leaves())
    assert_matches_the_walk(nodes, outs, since)
    if HAS_TORCH_HOOK:
        ours = seen_by(node_creation_hook, run_ops, ops, *leaves())[0]
        assert ours == seen_by(TG.node_creation_hook, run_ops, ops, *leaves())[0]


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_is_a_graph_made_before_the_block_left_out(hook_cm):
    a, _ = leaves()
    before = a * 2
    seen, _ = seen_by(hook_cm, lambda: [before.exp()])
    assert seen == [("ExpBackward0", ("MulBackward0",), ("_saved_result",))]


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_does_each_iteration_report_a_new_accumulate_grad(hook_cm):
    """The graph of each step is freed, so each step's leaf node is new (torch's note)."""
    a, _ = leaves()

    def steps():
        for _ in range(3):
            (a * 2).sum().backward()
        return []

    seen, _ = seen_by(hook_cm, steps)
    assert [name for name, _, _ in seen] == [
        "torch::autograd::AccumulateGrad",
        "MulBackward0",
        "SumBackward0",
    ] * 3


def nested(hook_cm):
    calls = []
    a, _ = leaves()
    with hook_cm(lambda n: calls.append(("outer", n.name()))):
        kept = a * 2  # keeps a's AccumulateGrad alive: the next ops reuse it
        with hook_cm(lambda n: calls.append(("inner", n.name()))):
            a.exp()
        a.sin()
    del kept
    return calls


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_are_nested_hooks_called_outermost_first(hook_cm):
    assert nested(hook_cm) == [
        ("outer", "torch::autograd::AccumulateGrad"),
        ("outer", "MulBackward0"),
        ("outer", "ExpBackward0"),
        ("inner", "ExpBackward0"),
        ("outer", "SinBackward0"),
    ]


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_does_a_leaf_node_made_inside_the_inner_block_reach_both_hooks(hook_cm):
    calls = []
    a, _ = leaves()
    with hook_cm(lambda n: calls.append(("outer", n.name()))):
        with hook_cm(lambda n: calls.append(("inner", n.name()))):
            a.exp()
    assert calls == [
        ("outer", "torch::autograd::AccumulateGrad"),
        ("inner", "torch::autograd::AccumulateGrad"),
        ("outer", "ExpBackward0"),
        ("inner", "ExpBackward0"),
    ]


@needs_torch_hook
def test_is_nesting_the_same_as_torchs():
    assert nested(node_creation_hook) == nested(TG.node_creation_hook)


def backward_with_create_graph(hook_cm):
    a, _ = leaves()
    loss = (a**3).sum()
    seen, (grad,) = seen_by(hook_cm, lambda: torch.autograd.grad(loss, a, create_graph=True))
    return seen, grad


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_does_backward_with_create_graph_report_the_nodes_it_makes(hook_cm):
    seen, grad = backward_with_create_graph(hook_cm)
    assert [name for name, _, _ in seen] == ["PowBackward0", "MulBackward1", "MulBackward0"]
    assert seen[-1][0] == grad.grad_fn.name()  # the gradient's own node, made last


@needs_torch_hook
def test_is_backward_the_same_as_torchs():
    assert (
        backward_with_create_graph(node_creation_hook)[0]
        == backward_with_create_graph(TG.node_creation_hook)[0]
    )


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_is_the_registration_thread_local(hook_cm):
    """A thread the program starts does not inherit the hook (only the engine's threads do)."""
    a, _ = leaves()

    def in_a_thread():
        thread = threading.Thread(target=lambda: a * 5)
        thread.start()
        thread.join()
        return []

    seen, _ = seen_by(hook_cm, in_a_thread)
    assert seen == []


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_does_a_hook_that_makes_a_node_raise(hook_cm):
    a, b = leaves()
    with pytest.raises(RuntimeError, match="node"):
        with hook_cm(lambda node: b * 3):
            a * 2
    seen, _ = seen_by(hook_cm, lambda: [a.cos()])  # and the next block starts clean
    assert [name for name, _, _ in seen] == ["torch::autograd::AccumulateGrad", "CosBackward0"]


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_does_an_error_in_the_hook_reach_the_caller_unchanged(hook_cm):
    a, _ = leaves()

    def hook(node):
        raise ValueError("from the hook")

    with pytest.raises(ValueError, match="from the hook"):
        with hook_cm(hook):
            a * 2


@pytest.mark.parametrize("hook_cm", IMPLEMENTATIONS)
def test_can_a_hook_tag_a_node_and_read_the_tag_in_backward(hook_cm):
    """torch's motivating use: remember the forward region, read it while backward runs."""
    a, _ = leaves()
    region, ran_in = ["?"], []

    def tag(node):
        made_in = region[0]
        node.register_prehook(lambda grad_outputs: ran_in.append((node.name(), made_in)))

    with hook_cm(tag):
        region[0] = "encoder"
        h = a.exp()
        region[0] = "head"
        loss = h.sum()
    loss.backward()
    assert ran_in == [
        ("SumBackward0", "head"),
        ("ExpBackward0", "encoder"),
        ("torch::autograd::AccumulateGrad", "encoder"),
    ]


def test_does_grad_off_make_no_nodes():
    a, _ = leaves()
    seen, _ = seen_by(node_creation_hook, lambda: [torch.no_grad()(lambda: a * 2)(), torch.ones(2) * 3])
    assert seen == []
