"""Does course.autograd.graph (lesson 1) agree with torch.autograd.graph on the same programs?

Each test runs one program through torch's module and through ours and compares what
a learner can observe: isinstance answers, nodes and edges, gradients, hook order,
version counters, error types and messages.
"""

import re

import pytest
import torch
import torch.autograd.graph as TG
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd.graph as CG

pytestmark = pytest.mark.lesson01

UNARY = {
    "exp": torch.exp,
    "sin": torch.sin,
    "mul2": lambda t: t * 2,
    "add1": lambda t: t + 1,
    "clone": torch.clone,
    "reshape": lambda t: t.reshape(-1),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "transpose": lambda t: t.transpose(0, -1),
    "sum": lambda t: t.sum(0, keepdim=True),
    "tanh": torch.tanh,
}
ops = st.lists(st.sampled_from(sorted(UNARY)), min_size=1, max_size=6)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def chain(names, leaf):
    """Apply the named ops in turn; return every intermediate tensor."""
    ts = [leaf]
    for name in names:
        ts.append(UNARY[name](ts[-1]))
    return ts


def leaf():
    return torch.arange(6.0).reshape(2, 3).add(1).requires_grad_()


def outcome(f):
    """(type name, message) of the exception f raises, or ('ok', result)."""
    try:
        return ("ok", f())
    except Exception as e:  # noqa: BLE001 - comparing whatever both raise
        return (type(e).__name__, str(e))


# --- Node ----------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(ops)
def test_is_every_node_in_a_random_graph_a_Node_for_both(names):
    ts = chain(names, leaf())
    nodes = [CG._get_grad_fn_or_grad_acc(t) for t in ts]
    for node in nodes:
        assert isinstance(node, CG.Node) == isinstance(node, TG.Node) == True  # noqa: E712
        assert issubclass(type(node), CG.Node) and issubclass(type(node), TG.Node)


def test_are_custom_function_nodes_Nodes_and_other_things_not():
    y = Square.apply(leaf())
    for thing in (y.grad_fn, type(y.grad_fn)):
        check = isinstance if not isinstance(thing, type) else issubclass
        assert check(thing, CG.Node) and check(thing, TG.Node)
    for other in (leaf(), 3, "MulBackward0", None, torch.nn.Linear(1, 1)):
        assert isinstance(other, CG.Node) == isinstance(other, TG.Node) == False  # noqa: E712


def test_does_Node_declare_the_same_abstract_methods_as_torch():
    assert CG.Node.__abstractmethods__ == TG.Node.__abstractmethods__
    with pytest.raises(TypeError):
        CG.Node()


@settings(max_examples=30, deadline=None)
@given(ops)
def test_do_name_next_functions_and_metadata_match_torch(names):
    ts = chain(names, leaf())
    for t in ts:
        ours, theirs = CG.get_gradient_edge(t), TG.get_gradient_edge(t)
        assert ours.node is theirs.node and ours.output_nr == theirs.output_nr
        node = ours.node
        assert node.name() == theirs.node.name()
        assert [(CG.node_repr(n), nr) for n, nr in node.next_functions] == [
            (CG.node_repr(n), nr) for n, nr in theirs.node.next_functions
        ]
        node.metadata["seen"] = len(names)
        assert theirs.node.metadata == {"seen": len(names)}


def test_does_node_repr_name_nodes_without_addresses():
    a = leaf()
    y = Square.apply(a)
    u0, u1 = torch.unbind(a * 1)
    assert CG.node_repr(y.grad_fn) == "SquareBackward"
    assert CG.node_repr(CG._get_grad_fn_or_grad_acc(a)) == "AccumulateGrad(shape=(2, 3))"
    assert CG.node_repr(u1.grad_fn) == "UnbindBackward0"
    # Same class name as in torch's own repr, minus the address.
    assert re.sub(r"<(\w+) object at 0x[0-9a-f]+>", r"\1", repr(u1.grad_fn)) == "UnbindBackward0"
    assert repr(CG.get_gradient_edge(u1)) == "GradientEdge(UnbindBackward0, output_nr=1)"
    assert repr(CG.get_gradient_edge(a)) == "GradientEdge(AccumulateGrad(shape=(2, 3)), output_nr=0)"
    assert "0x" not in repr(CG.get_gradient_edge(y))


# --- hook order ----------------------------------------------------------------------------


def hook_order(get_edge):
    """Register every kind of hook on b's node (found through get_edge) and record the order."""
    order = []
    a = leaf()
    b = a * 2
    node = get_edge(b).node
    acc = get_edge(a).node
    node.register_hook(lambda gI, gO: order.append("node post-hook"))
    node.register_prehook(lambda gO: order.append("node pre-hook"))
    b.register_hook(lambda g: order.append("tensor pre-hook"))
    acc.register_prehook(lambda gO: order.append("leaf node pre-hook"))
    a.register_hook(lambda g: order.append("leaf tensor pre-hook"))
    acc.register_hook(lambda gI, gO: order.append("leaf node post-hook"))
    b.sum().backward()
    return order


def test_do_hooks_fire_in_torchs_order_through_our_edges():
    ours = hook_order(CG.get_gradient_edge)
    assert ours == hook_order(TG.get_gradient_edge)
    assert ours[:3] == ["tensor pre-hook", "node pre-hook", "node post-hook"]
    assert ours[3:] == ["leaf tensor pre-hook", "leaf node pre-hook", "leaf node post-hook"]


def test_do_node_hooks_replace_gradients_and_remove_like_torch():
    grads = []
    for mod in (TG, CG):
        a = leaf()
        b = a.clone()
        h = mod.get_gradient_edge(b).node.register_hook(lambda gI, gO: (gO[0] * 3,))
        b.sum().backward(retain_graph=True)
        h.remove()
        b.sum().backward()
        grads.append(a.grad)
    assert torch.equal(grads[0], grads[1]) and torch.equal(grads[0], torch.full((2, 3), 4.0))


# --- GradientEdge and get_gradient_edge ----------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(ops, st.data())
def test_do_our_edges_give_torchs_gradients(names, data):
    ts = chain(names, leaf())
    i = data.draw(st.integers(0, len(ts) - 1), label="which tensor")
    out = (ts[-1] * ts[-1]).sum()
    expected = torch.autograd.grad(out, ts[i], retain_graph=True)[0]
    with_torch_edge = torch.autograd.grad(out, TG.get_gradient_edge(ts[i]), retain_graph=True)[0]
    with_our_edge = torch.autograd.grad(out, CG.get_gradient_edge(ts[i]), retain_graph=True)[0]
    # Bit-identical, NaN included: exp(exp(...)) overflows on some chains, and NaN != NaN.
    same = dict(rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(with_our_edge, expected, **same)
    torch.testing.assert_close(with_torch_edge, expected, **same)


def test_does_backward_inputs_accept_our_edges_like_torchs():
    results = []
    for mod in (TG, CG):
        a = leaf()
        b = a.exp()
        seen = []
        b.register_hook(seen.append)
        (b * b).sum().backward(inputs=[mod.get_gradient_edge(b), mod.get_gradient_edge(a)])
        results.append((seen[0], a.grad))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_is_our_edge_torchs_type_with_the_same_fields():
    a = leaf()
    y = Square.apply(a)
    ours, theirs = CG.get_gradient_edge(y), TG.get_gradient_edge(y)
    assert isinstance(ours, TG.GradientEdge) and ours == theirs[:2] + (ours.ownership_token,)
    assert type(ours.ownership_token) is type(theirs.ownership_token)  # a view's grad_fn
    assert CG.get_gradient_edge(a).ownership_token is None is TG.get_gradient_edge(a).ownership_token
    assert CG.GradientEdge._fields == TG.GradientEdge._fields


def test_does_the_ownership_token_keep_a_custom_function_graph_alive():
    grads = []
    for mod in (TG, CG):
        a = leaf()
        y = Square.apply(a)
        out = (y * 1).sum()
        edge = mod.get_gradient_edge(y)
        del y
        grads.append(torch.autograd.grad(out, edge)[0])
    assert torch.equal(grads[0], grads[1]) and torch.equal(grads[0], torch.ones(2, 3))


@pytest.mark.parametrize(
    "make",
    [lambda: torch.ones(2), lambda: 3, lambda: None, lambda: [torch.ones(1, requires_grad=True)]],
    ids=["no-grad tensor", "int", "None", "list"],
)
def test_does_get_gradient_edge_reject_bad_input_like_torch(make):
    assert outcome(lambda: CG.get_gradient_edge(make())) == outcome(lambda: TG.get_gradient_edge(make()))
    assert outcome(lambda: CG.get_gradient_edge(make()))[0] != "ok"


def test_does_grad_fn_or_grad_acc_fail_like_torch_without_a_node():
    t = torch.ones(2)
    assert outcome(lambda: CG._get_grad_fn_or_grad_acc(t)) == outcome(lambda: TG._get_grad_fn_or_grad_acc(t))
    assert outcome(lambda: CG._get_grad_fn_or_grad_acc(t))[0] == "AssertionError"


# --- increment_version ---------------------------------------------------------------------


def modified_error(mod, as_list):
    a = leaf()
    b = a.exp()  # saves b
    mod.increment_version([b, b] if as_list else b)
    return b._version, outcome(lambda: b.sum().backward())


@pytest.mark.parametrize("as_list", [False, True])
def test_does_increment_version_raise_torchs_inplace_error(as_list):
    ours, theirs = modified_error(CG, as_list), modified_error(TG, as_list)
    assert ours == theirs
    assert ours[1][0] == "RuntimeError" and "modified by an inplace operation" in ours[1][1]


def test_does_increment_version_leave_inference_tensors_alone_like_torch():
    with torch.inference_mode():
        t = torch.ones(2)
    assert (
        outcome(lambda: CG.increment_version(t)) == outcome(lambda: TG.increment_version(t)) == ("ok", None)
    )


@pytest.mark.parametrize("bad", [3, [3], "ab", [torch.ones(1), None]], ids=repr)
def test_does_increment_version_reject_bad_input_like_torch(bad):
    assert outcome(lambda: CG.increment_version(bad)) == outcome(lambda: TG.increment_version(bad))
    assert outcome(lambda: CG.increment_version(bad))[0] == "RuntimeError"
