"""Does course behave as torch does where the two used to differ?

Differential tests, torch as the oracle, for three points found while rewriting the
course's reference layer in its own words (issues 14 and 19):

- ``disable_saved_tensors_hooks`` entered while saved-tensor hooks are active;
- the nine ``fx_utils`` functions on graphs with a subclass's size and stride inputs
  (SymInts: torch raises only for a subclass's inner tensors);
- a course descriptor and its torch twin: equal both ways, same hash, so either one finds
  a dict entry keyed by the other.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
import torch._functorch._aot_autograd.descriptors as T
import torch._functorch._aot_autograd.fx_utils as torch_fx_utils
import torch.autograd.graph as torch_graph
from corpus import PLAIN_CASES, torch_joint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import fx

from course import autograd_graph
from course.aot import descriptors as C
from course.aot import fx_utils

# ---- disable_saved_tensors_hooks inside active hooks (issue 14) --------------------------

HOOK_BLOCKS = {
    "saved_tensors_hooks": lambda graph: graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: t),
    "save_on_cpu": lambda graph: graph.save_on_cpu(),
}


def _state() -> tuple[bool, str | None]:
    return (
        torch._C._autograd._saved_tensors_hooks_is_enabled(),
        torch._C._autograd._saved_tensors_hooks_get_disabled_error_message(),
    )


def _disable_inside_hooks(graph, block: str, message: str):
    """Enter ``disable_saved_tensors_hooks(message)`` inside a hook block; what is observed."""
    seen = []
    try:
        with HOOK_BLOCKS[block](graph):
            try:
                with graph.disable_saved_tensors_hooks(message):
                    seen.append("entered")
            except RuntimeError as e:
                seen.append(("RuntimeError", str(e)))
            seen.append(("inside hooks, after", _state()))
            x = torch.ones(3, requires_grad=True)
            y = (x * x).sum()  # the hooks still work after the refused block
        y.backward()
        seen.append(("grad", x.grad.tolist()))
    except RuntimeError as e:  # entering the hook block itself, under an outer disable
        seen.append(("RuntimeError on the hook block", str(e)))
    seen.append(("after", _state()))
    return seen


@settings(max_examples=25, deadline=None)
@given(
    block=st.sampled_from(sorted(HOOK_BLOCKS)),
    message=st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=30),
)
def test_disable_inside_active_hooks_raises_like_torch(block, message):
    """Entering the disable block while hooks are pushed: RuntimeError(message) at once, state kept?"""
    theirs = _disable_inside_hooks(torch_graph, block, message)
    ours = _disable_inside_hooks(autograd_graph, block, message)
    assert ours == theirs
    assert ("RuntimeError", message) in ours  # what the docstring now promises
    assert ours[-1] == ("after", (True, None))


def test_disable_outside_hooks_still_refuses_new_hooks_like_torch():
    """The ordinary order (disable first, then try hooks) still gives the message, on both sides?"""

    def run(graph):
        with graph.disable_saved_tensors_hooks("no hooks here"):
            return _disable_inside_hooks(graph, "save_on_cpu", "inner")

    assert run(autograd_graph) == run(torch_graph)
    assert ("RuntimeError on the hook block", "no hooks here") in run(autograd_graph)


# ---- fx_utils and a subclass's size / stride inputs (issue 19) ---------------------------

from test_fx_utils import NINE  # noqa: E402  (the nine functions, listed once; tests/ is on sys.path)


def _observe(call):
    """A function's result as plain data (keys by repr, nodes by name), or the error it raised."""
    try:
        result = call()
    except Exception as e:
        return type(e).__name__, str(e)
    name = lambda n: None if n is None else n.name  # noqa: E731
    if isinstance(result, list):
        return [name(n) for n in result]
    return [
        (k if isinstance(k, str) else repr(k), *((name(v),) if isinstance(v, fx.Node) else map(name, v)))
        for k, v in result.items()
    ]


def _graph_with_symint_inputs(kinds: list[str], with_grads: bool) -> fx.Graph:
    """A joint-like graph: params, plain inputs, a subclass's size/stride SymInts, tangents.

    ``kinds`` orders the placeholders ("param", "plain", "size", "stride"); outputs are one
    plain output per plain input, a size and a stride output for the subclass output, and
    (``with_grads``) a grad per parameter and plain input.
    """
    g = fx.Graph()
    params, plains, sizes = [], [], []
    for i, kind in enumerate(kinds):
        node = g.placeholder(f"{kind}_{i}")
        if kind == "param":
            node.meta["desc"] = T.ParamAOTInput(f"layer{len(params)}.weight")
            params.append(node)
        elif kind == "plain":
            node.meta["desc"] = T.PlainAOTInput(len(plains))
            plains.append(node)
        else:  # outer size or stride of the subclass passed as the input after the plain ones
            cls = T.SubclassSizeAOTInput if kind == "size" else T.SubclassStrideAOTInput
            node.meta["desc"] = cls(T.PlainAOTInput(99), len(sizes))
            sizes.append(node)
    outs, descs = [], []
    for j, p in enumerate(plains):
        outs.append(g.call_function(torch.neg, (p,)))
        descs.append(T.PlainAOTOutput(j))
    for j, s in enumerate(sizes):
        outs.append(s)
        cls = T.SubclassSizeAOTOutput if j % 2 == 0 else T.SubclassStrideAOTOutput
        descs.append(cls(T.PlainAOTOutput(len(plains)), j))
    for j in range(len(plains)):
        tangent = g.placeholder(f"tangents_{j}")
        tangent.meta["desc"] = T.TangentAOTInput(T.PlainAOTOutput(j))
    if with_grads:
        for node in params + plains:
            outs.append(g.call_function(torch.zeros_like, (node,)))
            descs.append(T.GradAOTOutput(node.meta["desc"]))
    out = g.output(outs)
    out.meta["desc"] = descs
    return g


def _to_course(g: fx.Graph) -> fx.Graph:
    for n in g.nodes:
        if n.op == "placeholder":
            n.meta["desc"] = C.from_torch(n.meta["desc"])
        elif n.op == "output":
            n.meta["desc"] = [None if d is None else C.from_torch(d) for d in n.meta["desc"]]
    return g


@pytest.mark.parametrize("name", NINE)
def test_size_and_stride_inputs_do_not_raise_like_torch(name):
    """A subclass's outer size and stride (SymInts) on the graph: course answers what torch answers?"""
    kinds = ["param", "plain", "size", "stride", "plain", "size"]
    theirs = _observe(lambda: getattr(torch_fx_utils, name)(_graph_with_symint_inputs(kinds, True)))
    assert not (isinstance(theirs, tuple) and theirs[0] == "RuntimeError")  # torch lets them pass
    assert _observe(lambda: getattr(fx_utils, name)(_graph_with_symint_inputs(kinds, True))) == theirs
    course_graph = _to_course(_graph_with_symint_inputs(kinds, True))
    assert _observe(lambda: getattr(fx_utils, name)(course_graph)) == theirs


@settings(max_examples=30, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["param", "plain", "size", "stride"]), min_size=1, max_size=7),
    with_grads=st.booleans(),
    name=st.sampled_from(NINE),
)
def test_random_graphs_with_symint_inputs_agree_with_torch(kinds, with_grads, name):
    """Any order of params, plain inputs and subclass sizes/strides: the nine agree with torch?"""
    theirs = _observe(lambda: getattr(torch_fx_utils, name)(_graph_with_symint_inputs(kinds, with_grads)))
    ours = _observe(lambda: getattr(fx_utils, name)(_graph_with_symint_inputs(kinds, with_grads)))
    assert ours == theirs


# ---- a course descriptor equals its torch twin (issue 19) --------------------------------

TORCH_CLASSES = {
    name: cls
    for name, cls in vars(T).items()
    if inspect.isclass(cls) and cls.__module__ == T.__name__ and issubclass(cls, (T.AOTInput, T.AOTOutput))
}
FIELD_VALUES = {  # two different values per field type, so unequal twins can be made too
    "int": (0, 1),
    "str": ("weight", "bias"),
    "AOTInput": (T.PlainAOTInput(0), T.BufferAOTInput("running_mean")),
    "DifferentiableAOTInput": (T.ParamAOTInput("weight"), T.PlainAOTInput(1)),
    "AOTOutput": (T.PlainAOTOutput(0), T.DummyAOTOutput(2)),
    "DifferentiableAOTOutput": (T.PlainAOTOutput(1), T.GradAOTOutput(T.PlainAOTInput(0))),
}


def _instance(cls, which: int):
    """A torch instance of ``cls``; ``which`` 0 or 1 picks one of two different field values."""
    fields = dataclasses.fields(cls)
    return cls(
        **{
            f.name: FIELD_VALUES[f.type if isinstance(f.type, str) else f.type.__name__][which]
            for f in fields
        }
    )


def test_every_class_is_covered():
    """The 35 descriptor classes of torch (the same on every supported release), each tested below?"""
    assert len(TORCH_CLASSES) == 35


@pytest.mark.parametrize("name", sorted(TORCH_CLASSES))
def test_course_descriptor_equals_its_torch_twin_both_ways(name):
    """course == torch, torch == course, same hash, and either finds the other's dict entry?"""
    theirs = _instance(TORCH_CLASSES[name], 0)
    ours = C.from_torch(theirs)
    assert type(ours) is getattr(C, name) and type(ours) is not type(theirs)
    assert ours == theirs and theirs == ours
    assert not (ours != theirs) and not (theirs != ours)
    assert hash(ours) == hash(theirs)
    assert {ours: "course key"}[theirs] == "course key"
    assert {theirs: "torch key"}[ours] == "torch key"
    assert theirs in {ours} and ours in {theirs}


@pytest.mark.parametrize("name", sorted(TORCH_CLASSES))
def test_course_descriptor_differs_from_other_torch_values(name):
    """Different fields, or another class with the same fields: unequal, both ways?"""
    cls = TORCH_CLASSES[name]
    ours = C.from_torch(_instance(cls, 0))
    if dataclasses.fields(cls):
        other = _instance(cls, 1)
        assert ours != other and other != ours and not (ours == other)
    for other_cls in TORCH_CLASSES.values():
        if other_cls is not cls and [f.name for f in dataclasses.fields(other_cls)] == [
            f.name for f in dataclasses.fields(cls)
        ]:
            try:
                other = _instance(other_cls, 0)
            except AssertionError:  # a field value the other class refuses
                continue
            assert ours != other and other != ours
    assert ours != 0 and ours != repr(ours) and ours != None  # noqa: E711


descriptor_trees = st.recursive(
    st.sampled_from([T.PlainAOTInput(0), T.PlainAOTInput(1), T.ParamAOTInput("w"), T.PlainAOTOutput(0)]),
    lambda inner: st.one_of(
        inner.filter(lambda d: isinstance(d, T.DifferentiableAOTInput)).map(T.GradAOTOutput),
        inner.filter(lambda d: isinstance(d, T.DifferentiableAOTOutput)).map(T.TangentAOTInput),
        st.builds(
            T.SubclassGetAttrAOTInput,
            inner.filter(lambda d: isinstance(d, T.AOTInput)),
            st.sampled_from("ab"),
        ),
        inner.filter(lambda d: isinstance(d, T.AOTInput)).map(T.ViewBaseAOTInput),
    ),
    max_leaves=4,
)


# The tree strategy filters by kind (a grad wraps a differentiable input, ...), so on some
# seeds most draws are thrown away: that is the design, not a slow test.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(a=descriptor_trees, b=descriptor_trees)
def test_equality_across_families_matches_torch_among_its_own(a, b):
    """For any two torch trees: every mix of course/torch compares as torch compares them, hash agrees?"""
    expected = a == b
    ours_a, ours_b = C.from_torch(a), C.from_torch(b)
    for left, right in [(ours_a, b), (a, ours_b), (ours_a, ours_b), (b, ours_a), (ours_b, a)]:
        assert (left == right) is expected
        assert (left != right) is (not expected)
    if expected:
        assert hash(ours_a) == hash(b) == hash(ours_b)


def test_fx_utils_results_answer_to_torch_descriptors():
    """``result[torch_desc]`` on course.fx_utils' result finds what torch's result holds (issue 19)?"""
    for case in PLAIN_CASES:
        gm = torch_joint(case.name)
        for name in ("get_all_input_and_grad_nodes", "get_all_output_and_tangent_nodes"):
            theirs = getattr(torch_fx_utils, name)(gm.graph)
            ours = getattr(fx_utils, name)(gm.graph)
            assert len(ours) == len(theirs)
            for torch_desc, pair in theirs.items():
                assert ours[torch_desc] == pair  # a torch key into the course-keyed dict
    bias = T.ParamAOTInput("bias")
    assert fx_utils.get_param_and_grad_nodes(torch_joint("linear").graph)[bias][0].name == "primals_2"


# ---- make_fx without a decomposition table (issue 32) --------------------------------------


def _view_ops(gm: fx.GraphModule) -> list[str]:
    return sorted(
        str(n.target)
        for n in gm.graph.nodes
        if n.op == "call_function" and str(n.target).startswith(("aten.detach.", "aten.alias."))
    )


def test_does_the_staged_builder_keep_detach_like_torchs_export():
    """torch 2.14's make_fx turns detach into alias when given no table; torch's export passes
    one and keeps detach. Every stage of ours keeps it too, on each supported torch?"""
    import contextlib

    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    from course.joint import export_joint

    class DetachTwice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            return y * y.detach() + x.detach()

    mod, args = DetachTwice(), (torch.randn(2, 3),)
    with contextlib.ExitStack() as stack:
        theirs = _view_ops(aot_export_joint_with_descriptors(stack, mod, args).graph_module)
    assert theirs and set(theirs) == {"aten.detach.default"}, theirs
    joint = export_joint(mod, args)
    assert _view_ops(joint.stage("traced_joint").graph_module) == theirs
    for stage in joint.stages:
        assert "aten.alias.default" not in _view_ops(stage.graph_module), stage.name
