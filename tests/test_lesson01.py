"""Lesson 1's claims, checked against torch and networkx beyond the generic exercise tests.

- Is the reference BFS of exercise 1.1 the breadth-first order networkx finds on the same graph,
  and does 1.1's oracle (networkx's bfs_edges) fail every known wrong walk?
- Does an in-place op break backward exactly when it changes a tensor the node saved (the
  rule exercise 1.3 teaches), for many ops and both targets (the op's input or its output)?
- Do torch's and course's increment_version give the same counters in exercise 1.4's program?
- Is a version counter the tensor's, not its memory's: shared by views and t.detach(), not by
  t.data?
- Do graphs share a leaf's AccumulateGrad only while one holds it (a new one once none does)?
"""

import contextlib

import networkx as nx
import pytest
import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd_graph as cg
from course.checks import get, grade_answer
from course.checks.solutions.lesson01 import bfs_names
from course.content.lesson01 import GRAPHS
from course.show import autograd_graph

pytestmark = pytest.mark.lesson01


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_reference_bfs_is_networkx_bfs_over_the_same_graph(graph):
    loss = GRAPHS[graph]()
    g = autograd_graph(loss)  # a DiGraph whose successors keep next_functions' order
    live = g.graph["nodes"]
    theirs = [live[n].name() for n in nx.bfs_tree(g, "n0")]
    assert bfs_names(loss.grad_fn) == theirs
    assert len(theirs) == g.number_of_nodes()  # every node once


def test_does_the_networkx_oracle_of_1_1_tell_a_wrong_walk_from_a_right_one():
    ex = get("1.1")
    assert ex.oracle is not ex.solution  # the generic test would compare the solution with itself
    for graph in sorted(GRAPHS):
        assert ex.oracle(GRAPHS[graph]().grad_fn) == bfs_names(GRAPHS[graph]().grad_fn)
    for w in ex.wrong:  # each misconception differs from networkx's order on some graph
        assert grade_answer(ex, w.answer).status in ("failed", "error"), w.hint[:60]
    for right in ex.right:
        assert grade_answer(ex, right).status == "passed"


UNARY = {
    "exp": torch.exp,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sin": torch.sin,
    "cos": torch.cos,
    "square": lambda t: t * t,
    "double": lambda t: t * 2,
    "pow3": lambda t: t.pow(3),
    "neg": torch.neg,
    "log": torch.log,
    "sqrt": torch.sqrt,
}


def _saved_tensors(node):
    out = []
    for attr in dir(node):
        if attr.startswith("_saved_"):
            value = getattr(node, attr)
            if isinstance(value, torch.Tensor):
                out.append(value)
    return out


@settings(max_examples=40, deadline=None)
@given(
    op=st.sampled_from(sorted(UNARY)),
    target=st.sampled_from(["input", "output"]),
    inplace=st.sampled_from(["add_", "mul_", "zero_"]),
)
def test_inplace_breaks_backward_iff_it_changes_a_saved_tensor(op, target, inplace):
    fn = UNARY[op]

    def forward(x):
        a = x * 1  # a non-leaf input we may change in place
        y = fn(a)
        return y, (a if target == "input" else y)

    y, changed = forward(torch.ones(3, requires_grad=True))
    saved_ptrs = {t.data_ptr() for t in _saved_tensors(y.grad_fn)}
    getattr(changed, inplace)(*([] if inplace == "zero_" else [2.0]))
    refuses = pytest.raises(RuntimeError, match="modified by an inplace operation")
    with refuses if changed.data_ptr() in saved_ptrs else contextlib.nullcontext():
        y.sum().backward()


@pytest.mark.parametrize("module", [tg, cg], ids=["torch", "course"])
def test_version_program_of_exercise_1_4_counts_the_same_with_either_increment_version(module):
    t = torch.zeros(3)
    t.add_(1)
    u = t[:2]
    u.mul_(2)
    v = t * 1
    with torch.no_grad():
        t.zero_()
    module.increment_version(v)
    assert (t._version, u._version, v._version) == get("1.4").oracle() == (3, 3, 1)


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.sampled_from(["t", "view", "detach", "data"]), min_size=1, max_size=6))
def test_a_version_counter_is_shared_by_views_and_detach_but_not_by_data(ops):
    t = torch.zeros(4)
    seen = {"t": t, "view": t[1:], "detach": t.detach(), "data": t.data}
    bumps = {name: 0 for name in seen}
    for name in ops:
        seen[name].add_(1)
        for other in ["t", "view", "detach"] if name != "data" else ["data"]:
            bumps[other] += 1
    assert {name: x._version for name, x in seen.items()} == bumps
    assert len({x.data_ptr() for x in (t, seen["detach"], seen["data"])}) == 1  # one memory


def test_graphs_share_a_leafs_accumulate_grad_only_while_one_holds_it():
    w = torch.zeros(2, requires_grad=True)

    def acc_of(leaf):
        return (leaf * 1).grad_fn.next_functions[0][0]

    held = acc_of(w)
    held.metadata["tag"] = 1
    assert acc_of(w) is held and tg.get_gradient_edge(w).node is held
    graph = w * 2  # a graph holds it now, not a name
    del held
    assert graph.grad_fn.next_functions[0][0].metadata == {"tag": 1}
    del graph  # nothing holds it: the next graph makes a new one
    assert acc_of(w).metadata == {}


def _edge_answer(grad_fn, edge_of):
    """A right answer to 1.2 that takes the gradient with the given grad and edge functions."""

    def answer(x, W1, W2):
        z = torch.mm(x, W1)
        edge = edge_of(z)
        z.relu_()
        return grad_fn((z @ W2).pow(2).sum(), [edge])[0]

    return answer


@pytest.mark.parametrize("edge_of", [tg.get_gradient_edge, cg.get_gradient_edge], ids=["torch", "course"])
def test_1_2_sees_the_edge_however_grad_was_imported(edge_of):
    from torch.autograd import grad as grad_bound_before_the_check  # not looked up on torch.autograd

    from course.checks import grade_answer

    before = torch.autograd._engine_run_backward
    result = grade_answer(get("1.2"), _edge_answer(grad_bound_before_the_check, edge_of))
    assert result.status == "passed", result.message
    assert torch.autograd._engine_run_backward is before  # the watch is taken off again


def test_1_2_fails_the_right_value_taken_without_an_edge():
    from course.checks import grade_answer

    def through_the_matmul_node(x, W1, W2):  # right value, a pre-hook on z's node, no edge
        z = x @ W1
        node = z.grad_fn
        z.relu_()
        got = []
        node.register_prehook(lambda grad_outputs: got.append(grad_outputs[0]))
        torch.autograd.grad((z @ W2).pow(2).sum(), W1)
        return got[0]

    x, W1, W2 = (
        torch.randn(4, 3),
        torch.randn(3, 5, requires_grad=True),
        torch.randn(5, 1, requires_grad=True),
    )
    a = x @ W1
    assert torch.allclose(
        through_the_matmul_node(x, W1, W2), torch.autograd.grad((a.relu() @ W2).pow(2).sum(), a)[0]
    )
    result = grade_answer(get("1.2"), through_the_matmul_node)
    assert result.status == "failed" and "gradient taken at a GradientEdge" in result.message
