"""Does course.aot.fx_utils find the same nodes as torch's fx_utils on torch's own joint graphs?

Every corpus case is exported once with torch's ``aot_export_joint_with_descriptors``
(cached in ``corpus.torch_joint``); each of the nine functions then runs through torch and
through course on that graph, and we compare (repr of key, node name, paired node name or
None) in order. The same comparison runs after converting the graph's descriptors to
course's, and on random MLPs (Hypothesis).
"""

import contextlib
import copy
import re

import pytest
import torch
import torch._functorch._aot_autograd.descriptors as T
import torch._functorch._aot_autograd.fx_utils as torch_fx_utils
from corpus import CASES, PLAIN_CASES, get_case, torch_joint
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import fx, nn
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

from course import SUPPORTED_TORCH, UnsupportedTorchError
from course.aot import descriptors as C
from course.aot import fx_utils
from course.aot.printing import format_joint_graph

pytestmark = [
    pytest.mark.lesson07,
    # copy.deepcopy of a GraphModule pickles its pytree spec, which torch 2.13 warns about
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning"),
]

NINE = [
    "get_all_input_and_grad_nodes",
    "get_all_output_and_tangent_nodes",
    "get_param_and_grad_nodes",
    "get_plain_input_and_grad_nodes",
    "get_plain_output_and_tangent_nodes",
    "get_named_param_nodes",
    "get_named_buffer_nodes",
    "get_param_nodes",
    "get_buffer_nodes",
]


def _name(n):
    return None if n is None else n.name


def observe(result):
    """What a caller sees: keys by repr, nodes by name, pairs in order."""
    if isinstance(result, list):
        return [_name(n) for n in result]
    rows = []
    for key, value in result.items():
        key = key if isinstance(key, str) else repr(key)
        rows.append((key, _name(value)) if isinstance(value, fx.Node) else (key, *map(_name, value)))
    return rows


def with_course_descs(gm: fx.GraphModule, convert=C.from_torch) -> fx.GraphModule:
    """A copy of ``gm`` whose descriptors are converted (to course's by default)."""
    gm = copy.deepcopy(gm)
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            n.meta["desc"] = convert(n.meta["desc"])
        elif n.op == "output":
            n.meta["desc"] = [None if d is None else convert(d) for d in n.meta["desc"]]
    return gm


def assert_agree(gm: fx.GraphModule, name: str, course_gm: fx.GraphModule | None = None):
    expected = observe(getattr(torch_fx_utils, name)(gm.graph))
    got = getattr(fx_utils, name)((course_gm or gm).graph)
    assert observe(got) == expected
    keys = got if isinstance(got, list) else list(got)
    assert all(isinstance(k, (str, fx.Node, C.AOTInput, C.AOTOutput)) for k in keys)


@pytest.mark.parametrize("name", NINE)
@pytest.mark.parametrize("case", [c.name for c in PLAIN_CASES])
def test_agrees_with_torch_on_torch_graphs(case, name):
    """Same keys, nodes and pairs, in the same order, as torch on torch's graph?"""
    assert_agree(torch_joint(case), name)


@pytest.mark.parametrize("name", NINE)
@pytest.mark.parametrize("case", [c.name for c in PLAIN_CASES])
def test_agrees_when_descriptors_are_course_ones(case, name):
    """Graph whose meta['desc'] holds course descriptors: same answer as torch on the original?"""
    gm = torch_joint(case)
    assert_agree(gm, name, course_gm=with_course_descs(gm))


def test_corpus_covers_the_descriptors_it_promises():
    """Do the torch-exported corpus graphs contain the descriptor kinds the cases are about?"""
    seen = set()
    for case in CASES:
        for line in format_joint_graph(torch_joint(case.name)).splitlines():
            seen.add(line.split()[2].split("(")[0])
    assert {
        "ParamAOTInput", "BufferAOTInput", "PlainAOTInput", "TangentAOTInput", "ViewBaseAOTInput",
        "SubclassGetAttrAOTInput", "PlainAOTOutput", "GradAOTOutput", "InputMutationAOTOutput",
        "IntermediateBaseAOTOutput", "SubclassGetAttrAOTOutput", "None",
    } <= seen  # fmt: skip


def test_graph_module_and_joint_object_are_accepted():
    """Does passing a GraphModule or torch's JointWithDescriptors give what the Graph gives?"""
    mod, args = get_case("batchnorm_train").build()
    with contextlib.ExitStack() as stack:
        joint = aot_export_joint_with_descriptors(stack, mod, args)
    for name in NINE:
        fn = getattr(fx_utils, name)
        expected = observe(fn(joint.graph_module.graph))
        assert observe(fn(joint.graph_module)) == expected
        assert observe(fn(joint)) == expected


@pytest.mark.parametrize("name", NINE)
def test_subclass_graph_raises_like_torch(name):
    """On the TwoTensor graph, do both raise RuntimeError with torch's explanation?"""
    gm = torch_joint("two_tensor_input")
    with pytest.raises(RuntimeError) as torch_err:
        getattr(torch_fx_utils, name)(gm.graph)
    with pytest.raises(RuntimeError) as course_err:
        getattr(fx_utils, name)(gm.graph)
    head = "Subclasses are currently not supported by this function, but a desugared subclass input was found at "
    assert str(torch_err.value).startswith(head) and str(course_err.value).startswith(head)
    tail = lambda e: str(e).split(")", 2)[-1]  # noqa: E731  (the part after "at node (desc))")
    assert tail(course_err.value) == tail(torch_err.value)


def _subclass_inputs_only_graph() -> fx.Graph:
    """A joint graph whose only subclass descriptors are on inputs (outputs are plain)."""
    g = fx.Graph()
    a = g.placeholder("primals_1")
    a.meta["desc"] = T.SubclassGetAttrAOTInput(T.PlainAOTInput(0), "a")
    b = g.placeholder("primals_2")
    b.meta["desc"] = T.SubclassGetAttrAOTInput(T.PlainAOTInput(0), "b")
    out = g.output([g.call_function(torch.add, (a, b))])
    out.meta["desc"] = [T.PlainAOTOutput(0)]
    return g


def test_we_raise_where_torch_documents_but_does_not_check():
    """Subclass inputs, plain outputs: torch's input/grad function returns; ours raises, as documented."""
    g = _subclass_inputs_only_graph()
    assert torch_fx_utils.get_all_input_and_grad_nodes(g) == {}  # torch's narrower check
    with pytest.raises(RuntimeError, match=r"found at primals_1 \(SubclassGetAttrAOTInput"):
        fx_utils.get_all_input_and_grad_nodes(g)
    with pytest.raises(RuntimeError):  # torch checks placeholders here: both raise
        torch_fx_utils.get_named_param_nodes(g)
    with pytest.raises(RuntimeError):
        fx_utils.get_named_param_nodes(g)


@pytest.mark.parametrize("name", NINE)
@pytest.mark.parametrize("bad", [None, 3, "graph", nn.Linear(2, 2)], ids=repr)
def test_non_graph_is_a_type_error(name, bad):
    """Is an argument that is not a graph a TypeError naming the function and the type?"""
    with pytest.raises(TypeError, match=rf"{name}\(\) expects a joint graph.*got {type(bad).__name__}"):
        getattr(fx_utils, name)(bad)


@pytest.mark.parametrize("name", NINE)
def test_graph_without_descriptors_says_how_to_make_one(name):
    """A plain symbolic_trace graph: does the error name both ways to get descriptors?"""
    gm = fx.symbolic_trace(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="aot_export_joint_with_descriptors.*course.aot.joint.export_joint"):
        getattr(fx_utils, name)(gm)
    with pytest.raises((KeyError, AssertionError)):  # torch's own, less helpful, errors
        getattr(torch_fx_utils, name)(gm.graph)


def test_unknown_descriptor_on_a_graph_names_its_class():
    """A descriptor class from a newer torch: does the error name it and the supported range?"""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class FutureAOTInput(T.AOTInput):
        pass

    g = _subclass_inputs_only_graph()
    next(iter(g.nodes)).meta["desc"] = FutureAOTInput()
    with pytest.raises(UnsupportedTorchError, match=f"FutureAOTInput.*{re.escape(str(SUPPORTED_TORCH))}"):
        fx_utils.get_param_nodes(g)


@settings(max_examples=20, deadline=None)
@given(
    widths=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    bias=st.booleans(),
    x_grad=st.booleans(),
    frozen=st.sets(st.integers(0, 2)),
)
def test_random_mlps_agree_with_torch(widths, bias, x_grad, frozen):
    """Random depth, widths, biases, frozen layers and input grad: all nine agree?"""
    layers = [nn.Linear(a, b, bias=bias) for a, b in zip(widths, widths[1:])]
    for i in frozen & set(range(len(layers))):
        layers[i].requires_grad_(False)
    mod = nn.Sequential(*layers)
    x = torch.randn(2, widths[0], requires_grad=x_grad)
    with contextlib.ExitStack() as stack:
        gm = aot_export_joint_with_descriptors(stack, mod, (x,)).graph_module
    course_gm = with_course_descs(gm)
    for name in NINE:
        assert_agree(gm, name)
        assert_agree(gm, name, course_gm=course_gm)


# ---- the printout ------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_printout_is_the_same_for_torch_and_course_descriptors(case):
    """Printing torch's graph and its course-converted copy gives the same text?"""
    gm = torch_joint(case)
    for expr in (False, True):
        assert format_joint_graph(with_course_descs(gm), expr=expr) == format_joint_graph(gm, expr=expr)


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_printout_lists_every_placeholder_and_output_in_order(case):
    """One line per placeholder, then one per output element, each with its node and repr?"""
    graph = torch_joint(case).graph
    expected = [("in", n.name, repr(n.meta["desc"])) for n in graph.find_nodes(op="placeholder")]
    out = graph.output_node()
    expected += [("out", str(n), repr(d)) for n, d in zip(out.args[0], out.meta["desc"])]
    lines = format_joint_graph(graph).splitlines()
    assert [tuple(line.split(maxsplit=2)) for line in lines] == expected
    assert (
        len({len(line) - len(line.split(maxsplit=2)[2]) for line in lines}) == 1
    )  # descriptors in one column
    assert " at 0x" not in format_joint_graph(graph, expr=True)


def test_printout_of_a_graph_without_descriptors():
    gm = fx.symbolic_trace(nn.Linear(2, 2))
    assert format_joint_graph(gm) == "in  input_1  (no desc)\nout linear   (no desc)"
    with pytest.raises(TypeError, match="format_joint_graph"):
        format_joint_graph("graph")
