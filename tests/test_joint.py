"""Does course.aot.joint build the joint graph torch's aot_export_joint_with_descriptors builds?

torch is the oracle: every corpus case is exported by both, and we compare the descriptor
sequences, the numbers the graph computes (against eager autograd) and what course.aot.fx_utils
reads off each graph. Exports are cached per case, so each is built once per session.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import subprocess
import sys
from pathlib import Path

import corpus  # H3's shared corpus (tests/corpus.py)
import pytest
import torch
import torch.utils._pytree as pytree
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
from torch._functorch.partitioners import min_cut_rematerialization_partition

from course.aot import descriptors as D
from course.aot import fx_utils
from course.aot.joint import export_joint
from course.aot.stage import STAGE_NAMES

pytestmark = pytest.mark.lesson06
ROOT = Path(__file__).resolve().parents[1]


# ---- the cases -----------------------------------------------------------------------------


class _Fn(torch.nn.Module):
    """A module whose forward is ``f(self, *args)``: lets one line describe a case."""

    def __init__(self, f, *mods: torch.nn.Module) -> None:
        super().__init__()
        self.f, self.mods = f, torch.nn.ModuleList(mods)

    def forward(self, *args, **kwargs):
        return self.f(self, *args, **kwargs)


def _lin(n_in=3, n_out=3):
    return torch.nn.Linear(n_in, n_out)


def _mutate_plain(s, x, buf):
    buf.add_(1.0)
    return s.mods[0](x) * 2


class _DoubleInPlaceBackward(torch.autograd.Function):
    """y = 2x, with a backward that works in place (so the joint needs functionalizing)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.clone().mul_(2)


class _StraightThroughRound(torch.autograd.Function):
    """round() forward, identity backward: a gradient no aten op of the forward implies."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


def _no_grad_scale(s, x):
    y = s.mods[0](x)
    with torch.no_grad():
        scale = y.abs().mean()  # a constant to autograd, though computed from y
    return y / scale


def _bn_and_no_grad_output(s, x):
    y = s.mods[1](s.mods[0](x))  # BatchNorm: buffer mutations, so stage 2 is a new trace
    with torch.no_grad():
        stats = y.mean(0)  # an output that needs no tangent
    return y, stats


def _reuse(s, x):
    h = s.mods[0](x).relu()
    return h * h + h.sin() + h  # h's gradient is accumulated from three uses


class _FunctionalBatchNorm(torch.nn.Module):
    """F.batch_norm on registered buffers: its kernel writes the running stats without
    declaring it in its schema, and no other op mutates (see joint_trace's NOTE)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("rm", torch.zeros(3))
        self.register_buffer("rv", torch.ones(3))
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return torch.nn.functional.batch_norm(x, self.rm, self.rv, self.w, None, training=True)


def _local_cases() -> dict[str, tuple]:
    """Cases beyond H3's corpus, each covering one more rule of the joint."""
    x = torch.randn(5, 3)
    return {
        "linear_bn": (torch.nn.Sequential(_lin(3, 4), torch.nn.BatchNorm1d(4)), (x,), {}),
        "functional_batch_norm": (_FunctionalBatchNorm(), (x,), {}),
        "two_outputs_one_detached": (
            _Fn(lambda s, x: (s.mods[0](x), s.mods[0](x).sum().detach(), s.mods[0](x) * 2), _lin()),
            (x,),
            {},
        ),
        "view_of_intermediate": (_Fn(lambda s, x: s.mods[0](x).view(-1), _lin()), (x,), {}),
        "output_and_its_view": (
            _Fn(lambda s, x: (lambda y: (y, y.view(-1)))(s.mods[0](x)), _lin()),
            (x,),
            {},
        ),
        "mutated_plain_input": (_Fn(_mutate_plain, _lin()), (x, torch.zeros(3)), {}),
        "kwargs_and_grad_input": (
            _Fn(lambda s, x, y=None: s.mods[0](x) * y.sin(), _lin()),
            (x,),
            {"y": torch.randn(5, 3, requires_grad=True)},
        ),
        "reused_intermediate": (_Fn(_reuse, _lin()), (x,), {}),
        "in_place_backward": (_Fn(lambda s, x: _DoubleInPlaceBackward.apply(s.mods[0](x)), _lin()), (x,), {}),
        "straight_through": (
            _Fn(lambda s, x: _StraightThroughRound.apply(s.mods[0](x)) * x, _lin()),
            (x,),
            {},
        ),
        "no_grad_block": (_Fn(_no_grad_scale, _lin()), (x,), {}),
        "bn_and_no_grad_output": (_Fn(_bn_and_no_grad_output, _lin(3, 4), torch.nn.BatchNorm1d(4)), (x,), {}),
        "parameterless_grad_input": (_Fn(lambda s, x: x.sin() * x), (x.clone().requires_grad_(),), {}),
        "dict_output": (_Fn(lambda s, x: {"a": s.mods[0](x), "b": s.mods[0](x).relu()}, _lin()), (x,), {}),
    }


#: Corpus features whose torch graph needs machinery course.aot.joint does not build.
UNBUILT_TAGS = {"intermediate_base", "view_base", "subclass"}
_LOCAL = _local_cases()
BUILT = sorted([c.name for c in corpus.CASES if c.plain and not c.tags & UNBUILT_TAGS] + list(_LOCAL))
UNBUILT = sorted(c.name for c in corpus.CASES if not c.plain or c.tags & UNBUILT_TAGS)


def _fresh(name: str):
    """A fresh (module, args, kwargs) for a corpus or local case; runs never share state."""
    if name in _LOCAL:
        torch.manual_seed(0)
        return copy.deepcopy(_LOCAL[name])
    mod, args = corpus.get_case(name).build()
    return mod, args, {}


@functools.cache
def ours(name: str):
    mod, args, kwargs = _fresh(name)
    return export_joint(mod, args, kwargs)


@functools.cache
def theirs(name: str):
    if name not in _LOCAL:
        return corpus.torch_joint(name)
    mod, args, kwargs = _fresh(name)
    with contextlib.ExitStack() as stack:
        return aot_export_joint_with_descriptors(stack, mod, args, kwargs).graph_module


def _descs(gm) -> tuple[list[str], list[str]]:
    ins = [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")]
    return ins, [repr(d) for d in gm.graph.output_node().meta["desc"]]


# ---- (a) descriptors ----------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILT)
def test_descriptor_sequences_equal_torchs(name):
    """Are the placeholder and output descriptors torch's, in torch's order (by repr)?"""
    assert _descs(ours(name).graph_module) == _descs(theirs(name))


@pytest.mark.parametrize("name", BUILT)
def test_descriptors_are_course_classes(name):
    """Do placeholders and outputs carry course descriptors (not torch's)?"""
    gm = ours(name).graph_module
    descs = [n.meta["desc"] for n in gm.graph.find_nodes(op="placeholder")]
    descs += [d for d in gm.graph.output_node().meta["desc"] if d is not None]
    assert all(isinstance(d, (D.AOTInput, D.AOTOutput)) for d in descs)


# ---- (b) numbers against eager --------------------------------------------------------------


def _eager(name: str, tangents: dict):
    """Eager autograd on the module: {output descriptor: value}, like the joint's outputs.

    ``tangents`` maps a forward output descriptor to its tangent; mutated inputs and buffers
    are compared after the forward, and grads come from ``torch.autograd.grad``.
    """
    mod, args, kwargs = _fresh(name)
    flat_in, spec = pytree.tree_flatten((args, kwargs))
    before = [t.detach().clone() for t in flat_in]
    wrt = {D.ParamAOTInput(k): p for k, p in mod.named_parameters(remove_duplicate=False)}
    wrt |= {D.PlainAOTInput(i): t for i, t in enumerate(flat_in) if t.requires_grad}
    bufs = dict(mod.named_buffers(remove_duplicate=False))
    bufs_before = {k: b.clone() for k, b in bufs.items()}
    args, kwargs = pytree.tree_unflatten(flat_in, spec)
    outs, _ = pytree.tree_flatten(mod(*args, **kwargs))
    live = {D.PlainAOTOutput(i): o for i, o in enumerate(outs)}
    live |= {
        D.InputMutationAOTOutput(D.BufferAOTInput(k)): b
        for k, b in bufs.items()
        if not torch.equal(b, bufs_before[k])
    }
    live |= {
        D.InputMutationAOTOutput(D.PlainAOTInput(i)): t
        for i, (t, b) in enumerate(zip(flat_in, before))
        if not torch.equal(t.detach(), b)
    }
    grads = torch.autograd.grad(
        [live[d] for d in tangents], list(wrt.values()), list(tangents.values()), allow_unused=True
    )
    result = {d: v.detach() for d, v in live.items()}
    return result | {D.GradAOTOutput(d): g for d, g in zip(wrt, grads) if g is not None}


def _ops(gm) -> list[str]:
    return sorted(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


@pytest.mark.parametrize("name", BUILT)
def test_joint_records_torchs_ops(name):
    """Does our joint call the same aten ops as torch's, as many times (clones aside)?

    torch clones a mutated input before its forward, and its functionalized replay of
    TransformerEncoderLayer keeps three clones ours has not: ours has no more clones.
    """
    a, b = _ops(ours(name).graph_module), _ops(theirs(name))
    clone = "aten.clone.default"
    assert [op for op in a if op != clone] == [op for op in b if op != clone]
    assert a.count(clone) <= b.count(clone)


@pytest.mark.parametrize("name", BUILT)
def test_joint_computes_eager_outputs_buffers_and_grads(name):
    """Does running our joint graph give eager's outputs, buffer updates and gradients?"""
    jd = ours(name)
    mod, args, kwargs = _fresh(name)
    torch.manual_seed(1)
    tangents = {
        n.meta["desc"].output: torch.randn(n.meta["val"].shape)
        for n in jd.graph_module.graph.find_nodes(op="placeholder")
        if isinstance(n.meta["desc"], D.TangentAOTInput)
    }
    got = jd.run(
        args,
        kwargs,
        params=dict(mod.named_parameters(remove_duplicate=False)),
        buffers={k: b.clone() for k, b in mod.named_buffers(remove_duplicate=False)},
        tangents=list(tangents.values()),
    )
    want = _eager(name, tangents)
    got = {d: v for d, v in got.items() if v is not None}
    assert sorted(map(repr, got)) == sorted(map(repr, want))
    for d, v in want.items():
        if d in _tied_grads(mod):  # torch unties: one partial grad per name, eager sums them
            v = v.new_zeros(v.shape)
            got_sum = sum(got[e] for e in _tied_grads(mod)[d])
            torch.testing.assert_close(got_sum, want[d])
            continue
        torch.testing.assert_close(got[d], v, msg=lambda m: f"{d}: {m}")  # noqa: B023 (called in this iteration)


def _tied_grads(mod) -> dict:
    """GradAOTOutput of a tied name -> the grads of every name of that Parameter."""
    names: dict[int, list[str]] = {}
    for k, p in mod.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(k)
    grads = [[D.GradAOTOutput(D.ParamAOTInput(k)) for k in ks] for ks in names.values() if len(ks) > 1]
    return {g: group for group in grads for g in group}


@pytest.mark.parametrize("name", UNBUILT)
def test_unbuilt_corpus_cases_raise_not_implemented(name):
    """Does every corpus case we do not build raise NotImplementedError, never a wrong graph?"""
    mod, args, kwargs = _fresh(name)
    with pytest.raises(NotImplementedError, match="aot_export_joint_with_descriptors"):
        export_joint(mod, args, kwargs)


@pytest.mark.parametrize(
    "name", ["linear_bn", "mlp", "transformer_encoder_layer", "input_mutation_differentiable"]
)
def test_partitioned_forward_then_backward_equals_joint(name):
    """Do the partitioned graphs, run one after the other, compute what the joint computes?"""
    jd = ours(name)
    mod, args, kwargs = _fresh(name)
    primals = [*jd.params.values(), *jd.buffers.values(), *pytree.tree_leaves((args, kwargs))]
    primals = [p.detach().clone() for p in primals]
    n_tan = sum(jd.tangent_mask)
    fw_out = jd.fw_module(*primals)
    outs = fw_out[: jd.num_fwd_outputs]
    tangents = [torch.ones_like(o) for o, m in zip(outs, jd.tangent_mask) if m]
    assert len(tangents) == n_tan
    grads = jd.bw_module(*fw_out[jd.num_fwd_outputs :], *tangents)
    j_outs, j_grads = jd(primals, tangents)
    for a, b in zip([*outs, *grads], [*j_outs, *j_grads]):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)


def test_saved_values_carry_saved_for_backwards_descriptors():
    """Is every value the forward hands the backward a SavedForBackwardsAOTOutput, numbered?"""
    jd = ours("linear_bn")
    descs = jd.fw_module.graph.output_node().meta["desc"]
    saved = descs[jd.num_fwd_outputs :]
    assert saved == [D.SavedForBackwardsAOTOutput(i) for i in range(len(saved))] and saved


def test_min_cut_partitioner_is_accepted():
    """Can the learner swap in torch's min-cut partitioner and still get a working split?"""
    mod, args, kwargs = _fresh("mlp")
    jd = export_joint(mod, args, kwargs, partition_fn=min_cut_rematerialization_partition)
    assert jd.stage("partitioned_forward").graph_module is jd.fw_module
    assert _descs(jd.graph_module) == _descs(theirs("mlp"))


def test_run_defaults_to_the_modules_state_and_ones_tangents():
    """Does run() with no params/buffers/tangents use the module's own and ones_like tangents?"""
    jd = ours("mlp")
    mod, args, _ = _fresh("mlp")
    got = jd.run(args)
    out = mod(*args)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(got[D.PlainAOTOutput(0)], out.detach())
    for k, p in mod.named_parameters():
        torch.testing.assert_close(got[D.GradAOTOutput(D.ParamAOTInput(k))], p.grad)


@settings(max_examples=10, deadline=None)
@given(
    widths=st.lists(st.integers(1, 6), min_size=2, max_size=4),
    batch=st.integers(1, 4),
    bn=st.booleans(),
    grad_input=st.booleans(),
)
def test_random_mlps_match_torch_and_eager(widths, batch, bn, grad_input):
    """For MLPs of random widths (optionally ending in BatchNorm), do descriptors match torch's
    and grads match eager autograd?"""
    torch.manual_seed(0)
    layers = [m for a, b in zip(widths, widths[1:]) for m in (_lin(a, b), torch.nn.Tanh())]
    if bn:
        layers.append(torch.nn.BatchNorm1d(widths[-1]))
    mod = torch.nn.Sequential(*layers)
    x = torch.randn(batch + bn, widths[0], requires_grad=grad_input)  # BatchNorm needs 2 rows
    jd = export_joint(copy.deepcopy(mod), (x,))
    with contextlib.ExitStack() as stack:
        ref = aot_export_joint_with_descriptors(stack, copy.deepcopy(mod), (x,)).graph_module
    assert _descs(jd.graph_module) == _descs(ref)
    got = jd.run((x.detach(),), buffers={k: b.clone() for k, b in mod.named_buffers()})
    out = mod(x)
    wrt = [*mod.parameters()] + ([x] if grad_input else [])
    grads = torch.autograd.grad(out, wrt, torch.ones_like(out))
    descs = [D.ParamAOTInput(k) for k, _ in mod.named_parameters()] + [D.PlainAOTInput(0)] * grad_input
    for d, g in zip(descs, grads):
        torch.testing.assert_close(got[D.GradAOTOutput(d)], g)


def test_decompositions_apply_to_forward_and_backward_as_in_torch():
    """Does a decomposition table reach every trace, giving torch's ops and descriptors?"""
    from torch._decomp import get_decompositions

    table = get_decompositions([torch.ops.aten.addmm, torch.ops.aten.threshold_backward])
    mod, args, kwargs = _fresh("mlp")
    jd = export_joint(mod, args, kwargs, decompositions=table)
    with contextlib.ExitStack() as stack:
        ref = aot_export_joint_with_descriptors(stack, mod, args, decompositions=table).graph_module
    ours_ops = _ops(jd.graph_module)
    assert ours_ops == _ops(ref)
    assert "aten.addmm.default" not in ours_ops and "aten.threshold_backward.default" not in ours_ops
    assert _descs(jd.graph_module) == _descs(ref)


# ---- (c) fx_utils on both graphs ------------------------------------------------------------


def _positions(gm, pairs):
    """desc repr -> where its two nodes sit: ("in", placeholder index) / ("out", output index).

    Node names may differ between two graphs; positions in the calling convention may not.
    """
    ph = list(gm.graph.find_nodes(op="placeholder"))
    out = list(gm.graph.output_node().args[0])

    def where(n):
        return None if n is None else ("in", ph.index(n)) if n in ph else ("out", out.index(n))

    return {repr(d): (where(a), where(b)) for d, (a, b) in pairs.items()}


@pytest.mark.parametrize("name", BUILT)
def test_fx_utils_pairs_params_with_the_same_grads(name):
    """Does course.aot.fx_utils pair each parameter with the same gradient on ours as on torch's?"""
    a, b = ours(name).graph_module, theirs(name)
    for get in (
        fx_utils.get_param_and_grad_nodes,
        fx_utils.get_all_input_and_grad_nodes,
        fx_utils.get_all_output_and_tangent_nodes,
    ):
        assert _positions(a, get(a.graph)) == _positions(b, get(b.graph)), get.__name__
    assert list(fx_utils.get_named_param_nodes(a.graph)) == ours(name).params_spec
    assert list(fx_utils.get_named_buffer_nodes(a.graph)) == ours(name).buffers_spec


# ---- stages -----------------------------------------------------------------------------------

STAGES = [
    "traced_forward",
    "functionalized_forward",
    "joint_function",
    "traced_joint",
    "descriptors",
    "partitioned_forward",
    "partitioned_backward",
]


def test_stages_are_named_in_order_with_graphs():
    """Are the seven stages there, in order, each with an explanation and a drawable graph?"""
    jd = ours("linear_bn")
    assert [s.name for s in jd.stages] == STAGES == list(STAGE_NAMES)
    for s in jd.stages:
        assert s.explanation and s.text.startswith(f"== {s.name} ==")
        assert isinstance(s.graph, torch.fx.Graph) and s.graph is s.graph_module.graph
        assert repr(s) == f"Stage(name={s.name!r}, nodes={len(s.graph.nodes)})"


def test_in_place_backward_is_functionalized():
    """Does a backward that works in place end up functional in the joint, as in torch?"""
    text = ours("in_place_backward").stage("traced_joint").text
    assert "aten.mul_" not in text and "aten.mul.Tensor" in text


def test_traced_forward_keeps_mutation_and_functionalized_removes_it():
    """Does stage 1 show add_ on the buffer and stage 2 return the new value as an output?"""
    jd = ours("linear_bn")
    assert "aten.add_.Tensor" in jd.stage("traced_forward").text
    ffw = jd.stage("functionalized_forward")
    assert "add_" not in ffw.text and "aten.add.Tensor" in ffw.text
    assert "tangents_1" in jd.stage("joint_function").text


@pytest.mark.parametrize("name", ["linear_bn", "transformer_encoder_layer", "mutated_plain_input"])
def test_stage_printouts_are_deterministic(name):
    """Does building the same export twice print every stage identically, with no addresses?"""
    mod, args, kwargs = _fresh(name)
    again = export_joint(mod, args, kwargs)
    for s1, s2 in zip(ours(name).stages, again.stages, strict=True):
        assert s1.text == s2.text
        assert "0x" not in s1.text


# ---- stages on demand (NOTE [Stages on demand] in course/aot/stage.py) ----------------------

_JOINT_STAGES = {"traced_joint", "descriptors"}  # what the export itself builds


def test_export_builds_only_the_joint_until_stages_are_asked_for(monkeypatch):
    """Does export_joint trace only what the joint needs, building stages 1-3 and 6-7 on demand?"""
    from course.aot import steps as joint_trace

    calls = {"trace_forward": 0, "partition": 0}
    for fname in calls:

        def counted(*a, _f=getattr(joint_trace, fname), _n=fname, **k):  # noqa: B008 (bound once, on purpose)
            calls[_n] += 1
            return _f(*a, **k)

        monkeypatch.setattr(joint_trace, fname, counted)
    mod, args, kwargs = _fresh("linear_bn")
    jd = export_joint(mod, args, kwargs)
    assert calls == {"trace_forward": 0, "partition": 0}
    assert jd.stage_builder.built() == _JOINT_STAGES
    assert set(jd.timings) == {"metadata"} | _JOINT_STAGES
    assert jd.stage("descriptors").graph_module is jd.graph_module  # no build needed
    jd.stage("functionalized_forward")
    assert calls == {"trace_forward": 1, "partition": 0}
    assert jd.stage_builder.built() == _JOINT_STAGES | set(STAGES[:3])
    jd.fw_module  # noqa: B018 (read for its effect)
    assert calls == {"trace_forward": 1, "partition": 1}
    assert [s.name for s in jd.stages] == STAGES and calls == {"trace_forward": 1, "partition": 1}
    assert set(jd.timings) == {"metadata"} | set(STAGES)
    with pytest.raises(KeyError, match="no stage 'nope'"):
        jd.stage("nope")


@pytest.mark.parametrize("name", BUILT)
def test_stages_built_late_print_what_stages_built_at_once_print(name):
    """Built after the partition, a run, model.eval() and no_grad, do the stages print what
    stages asked for right after the export print (and is the module left as it was)?"""
    at_once = {s.name: s.text for s in ours(name).stages}
    mod, args, kwargs = _fresh(name)
    jd = export_joint(mod, args, kwargs)
    jd.fw_module, jd.bw_module  # noqa: B018 (read for its effect)
    jd.run(args, kwargs, buffers={k: b.clone() for k, b in jd.buffers.items()})
    mod.eval()
    with torch.no_grad():
        late = {s.name: s.text for s in jd.stages}
    assert late == at_once
    assert not any(m.training for m in mod.modules())


def test_stages_refuse_a_module_changed_since_the_export():
    """If a parameter stops requiring grad after the export, are the stages refused, not wrong?"""
    mod, args, kwargs = _fresh("linear_bn")
    jd = export_joint(mod, args, kwargs)
    mod[0].weight.requires_grad_(False)
    with pytest.raises(RuntimeError, match="export again"):
        jd.stages  # noqa: B018 (read for its effect)
    assert jd.stage("traced_joint").graph_module is jd.graph_module  # built at export: still there


# ---- what we refuse ---------------------------------------------------------------------------


def _x():
    return torch.randn(4, 3)


@pytest.mark.parametrize(
    "f, args, match",
    [
        (lambda s, x: s.mods[0](x).detach(), (_x(),), "no output requires grad"),
        (lambda s, x: 3, (_x(),), "must return tensors"),
        (lambda s, x: (s.mods[0](x), 3), (_x(),), r"holding \['int'\]"),
        (lambda s, x: None, (_x(),), "returned NoneType"),
    ],
)
def test_bad_input_gives_a_clear_error(f, args, match):
    """Do non-tensor outputs and outputs without grad give a clear error?"""
    with pytest.raises((TypeError, ValueError), match=match):
        export_joint(_Fn(f, _lin()), args)


def test_nothing_requires_grad_is_a_clear_error():
    """Does a module without parameters (and no input requiring grad) get a clear error?"""
    with pytest.raises(ValueError, match="nothing requires grad"):
        export_joint(torch.nn.ReLU(), (_x(),))
    with pytest.raises(ValueError, match="nothing requires grad"):
        export_joint(torch.sin, (_x(),))


def test_plain_function_with_grad_input_matches_torch():
    """Does a plain function (no module) export like torch's export of a wrapping module?"""
    x = torch.randn(3, requires_grad=True)
    jd = export_joint(torch.sin, (x,))
    with contextlib.ExitStack() as st:
        ref = aot_export_joint_with_descriptors(st, corpus.FunctionModule(torch.sin), (x,)).graph_module
    assert _descs(jd.graph_module) == _descs(ref)
    (out,), (g,) = jd([x.detach()], [torch.ones(3)])
    torch.testing.assert_close(g, x.detach().cos())


def _rng_case():
    m = torch.nn.Sequential(_lin(), torch.nn.Dropout(0.5))
    return m, (_x(),)


@pytest.mark.parametrize(
    "make, feature",
    [
        (
            lambda: (
                _lin(),
                (__import__("torch.testing._internal.two_tensor", fromlist=["x"]).TwoTensor(_x(), _x()),),
            ),
            "tensor subclass",
        ),
        (
            lambda: (
                _Fn(lambda s, x, y: s.mods[0](x.add_(1)) + y, _lin()),
                (lambda b: (b, b.view(4, 3)))(torch.randn(4, 3)),
            ),
            "synthetic base",
        ),
        (
            lambda: (_Fn(lambda s, x: (lambda y: (y.view(-1), y[0]))(s.mods[0](x)), _lin()), (_x(),)),
            "IntermediateBaseAOTOutput",
        ),
        (lambda: (_Fn(lambda s, x: s.mods[0](x.t_()), _lin(4, 3)), (_x(),)), "metadata mutated"),
    ],
)
def test_unbuilt_features_raise_not_implemented(make, feature):
    """Where torch needs machinery we do not build, do we refuse and name it (never a wrong graph)?"""
    mod, args = make()
    with pytest.raises(NotImplementedError, match=feature) as info:
        export_joint(mod, args)
    assert "aot_export_joint_with_descriptors" in str(info.value)


def test_in_place_on_a_leaf_that_requires_grad_fails_as_in_eager():
    """Does mutating a leaf input that requires grad fail with eager's own error?"""
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        export_joint(_Fn(lambda s, x: s.mods[0](x.mul_(2)), _lin()), (_x().requires_grad_(),))


def test_rng_functionalization_raises_but_plain_dropout_matches_torch():
    """Is dropout exported as torch does by default, and refused when torch would add seeds?"""
    mod, args = _rng_case()
    with contextlib.ExitStack() as st:
        ref = aot_export_joint_with_descriptors(st, copy.deepcopy(mod), args).graph_module
    assert _descs(export_joint(mod, args).graph_module) == _descs(ref)
    with torch._functorch.config.patch(functionalize_rng_ops=True):
        with pytest.raises(NotImplementedError, match="Philox"):
            export_joint(mod, args)


@pytest.mark.slow
def test_benchmark_quick_runs():
    """Does benchmarks/joint.py --quick run to the end and print a ratio per model?"""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "joint.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    for model in ("Linear", "MLP8", "TransformerEncoderLayer", "Linear+BatchNorm1d"):
        assert model in out
    assert "course/torch" in out


class _NestedOutputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return {"a": y, "b": (y.sin(), [y.cos()])}


@pytest.mark.parametrize("make", [lambda: torch.nn.Linear(3, 2), _NestedOutputs])
def test_does_the_out_spec_unflatten_the_outputs_as_torchs_does(make):
    """export_joint's out_spec is torch's: the pytree spec of what the module returns."""
    x = torch.randn(2, 3)
    ours = export_joint(make(), (x,))
    with contextlib.ExitStack() as stack:
        reference = aot_export_joint_with_descriptors(stack, make(), (x,))
    assert ours.out_spec == reference.out_spec
    module = make()
    flat, spec = torch.utils._pytree.tree_flatten(module(x))
    assert ours.out_spec == spec


class _Scaled(torch.nn.Module):
    """A linear layer whose forward takes non-tensor arguments: torch bakes them into the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, scale=1.0, n=0, relu=False, note="unused"):
        y = self.lin(x) * scale + n
        return y.relu() if relu else y


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((2.5,), {}),
        ((), {"scale": 2.5}),
        ((), {"scale": -0.5, "n": 3, "relu": True, "note": "a string"}),
    ],
    ids=["float-positional", "float-keyword", "float-int-bool-str"],
)
def test_is_a_non_tensor_input_baked_into_the_graph_as_torch_bakes_it(args, kwargs):
    """A float (int, bool, string) argument: the same placeholders, descriptors and ops as
    torch's export, its value a constant of the graph, and the joint computes eager's numbers."""
    torch.manual_seed(0)
    mod, x = _Scaled(), torch.randn(4, 3)
    ours = export_joint(mod, (x, *args), kwargs)
    with contextlib.ExitStack() as stack:
        reference = aot_export_joint_with_descriptors(stack, mod, (x, *args), kwargs).graph_module
    assert _descs(ours.graph_module) == _descs(reference)
    assert _ops(ours.graph_module) == _ops(reference)
    consts = list(ours.graph_module.graph.find_nodes(op="placeholder"))[3:-1]
    refs = list(reference.graph.find_nodes(op="placeholder"))[3:-1]
    assert [(len(n.users), n.meta.get("val", "absent")) for n in consts] == [
        (len(n.users), n.meta.get("val", "absent")) for n in refs
    ]
    assert all(not n.users for n in consts)
    xg = x.clone().requires_grad_()
    eager = mod(xg, *args, **kwargs)
    tangent = torch.randn_like(eager)
    eager.backward(tangent)
    flat = pytree.tree_leaves(((x, *args), kwargs))
    primals = [*mod.parameters(), *flat]
    for joint in (ours, reference):
        with torch.no_grad():
            (out,), (g_w, g_b, *rest) = joint(primals, [tangent])
        torch.testing.assert_close(out, eager.detach())
        torch.testing.assert_close(g_w, mod.lin.weight.grad)
        torch.testing.assert_close(g_b, mod.lin.bias.grad)
        assert rest == [None] * len(flat)


def test_is_a_baked_constant_kept_when_the_graph_is_called_with_another_value():
    """NOTE [Constants keep a placeholder], rule 3: the graph computes with the exported value,
    through our joint, its partitioned forward, and torch's joint alike."""
    torch.manual_seed(0)
    mod, x = _Scaled(), torch.randn(4, 3)
    ours = export_joint(mod, (x,), {"scale": 2.5})
    with contextlib.ExitStack() as stack:
        reference = aot_export_joint_with_descriptors(stack, mod, (x,), {"scale": 2.5}).graph_module
    expected = mod(x, scale=2.5).detach()
    primals = [*mod.parameters(), x, 3.0]
    torch.testing.assert_close(ours.run((x,), {"scale": 3.0})[D.PlainAOTOutput(0)], expected)
    torch.testing.assert_close(ours.fw_module(*primals)[0], expected)
    with torch.no_grad():
        torch.testing.assert_close(reference(primals, [torch.ones(4, 3)])[0][0], expected)
