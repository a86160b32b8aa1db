"""Are lesson 6's checks honest? Eager autograd and eager side effects judge the check machinery.

The generic tests (tests/test_checks.py) already ask whether each solution passes, each stub
is "not attempted" and each known wrong answer fails with its hint. Here we ask whether what
the checks *compare against* is right:

- is exercise 6.1's oracle (eager autograd on the new inputs) what ``torch.func.vjp`` says?
  And do the ``.backward()`` answers show the side effects their hints name (the caller's
  ``.grad`` changed, or wiped)?
- does BatchNorm's running-stat update get no tangent even when ``x`` requires grad (lesson 6,
  stage 3), in torch and in course?
- does exercise 6.3's truth (torch's exporter) agree with ``course.aot.joint``?
- does exercise 6.4's expected plan, applied the way torch's runtime does (run the joint,
  ``copy_`` each mutation output into its input), leave the buffers and inputs exactly as an
  eager forward leaves them, for every module the check exports, from both exporters?
"""

import copy

import pytest
import torch

from course.aot import descriptors as cd
from course.checks.lesson06 import (
    FUNCTIONS,
    MODULES,
    Accumulate,
    _accumulate_placeholders,
    accumulate_args,
    _backward,
    _backward_then_wipe,
    _eager,
    _oracle,
    _primals_and_tangents,
    _run_traced,
    joint_case,
    make_joint,
    seeded,
    torch_export,
)
from course.aot.joint import export_joint

pytestmark = [pytest.mark.lesson06]


def _course(desc):
    return desc if desc is None or isinstance(desc, (cd.AOTInput, cd.AOTOutput)) else cd.from_torch(desc)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_6_1_oracle_is_torch_func_vjp(name):
    fn, primals, tangents = _primals_and_tangents(name, seed=1, requires_grad=False)
    outs, vjp = torch.func.vjp(fn, *primals)
    expected = _eager(name)
    for a, b in zip(expected["outs"], outs):
        torch.testing.assert_close(a, b)
    for a, b in zip(expected["grads"], vjp(tuple(tangents))):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_backward_in_a_joint_changes_the_callers_grad_and_wiping_it_loses_it(name):
    good, bad = _run_traced(make_joint, name), _run_traced(_backward, name)
    wiped = _run_traced(_backward_then_wipe, name)
    assert good["primals' .grad after tracing"] == ["unchanged"] * len(good["grads"])
    assert all(state == "changed" for state in bad["primals' .grad after tracing"])
    assert all(state.startswith("None") for state in wiped["primals' .grad after tracing"])
    for a, b in zip(good["grads"], wiped["grads"]):  # right grads: only the side effect is wrong
        torch.testing.assert_close(a, b)


def test_batchnorm_running_stats_get_no_tangent_even_when_x_requires_grad():
    """Lesson 6, stage 3: the running-stat update is declared not differentiable in torch."""
    bn, (x,) = seeded(*MODULES["batchnorm"])
    x.requires_grad_()
    theirs = torch_export(bn, (x,))
    tangents = [n for n in theirs.graph.find_nodes(op="placeholder") if "tangents" in n.name]
    assert len(tangents) == 1
    assert export_joint(bn, (x,)).tangent_mask == [False, False, False, True]
    outs = torch.ops.aten._native_batch_norm_legit_functional.default(
        x, bn.weight, bn.bias, bn.running_mean.clone(), bn.running_var.clone(), True, 0.1, 1e-5)
    assert [o.requires_grad for o in outs] == [True, False, False, False, False]
    assert (0.9 * bn.running_mean + 0.1 * x.mean(0)).requires_grad  # the same update, by hand


def test_the_6_3_truth_is_what_course_joint_builds():
    torch.manual_seed(0)
    gm = export_joint(Accumulate(), accumulate_args()).graph_module
    assert [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")] == _accumulate_placeholders()


@pytest.mark.parametrize("exporter", ["torch", "course"])
@pytest.mark.parametrize("name", sorted(MODULES))
def test_copying_back_by_the_6_4_plan_reproduces_eager_side_effects(name, exporter):
    mod, args = seeded(*MODULES[name])
    gm = joint_case(name, exporter)
    primals, tangents = [], []
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    for n in gm.graph.find_nodes(op="placeholder"):
        d = _course(n.meta["desc"])
        if isinstance(d, cd.ParamAOTInput):
            primals.append(mod.get_parameter(d.target).detach().clone())
        elif isinstance(d, cd.BufferAOTInput):
            primals.append(mod.get_buffer(d.target).clone())
        elif isinstance(d, cd.PlainAOTInput):
            primals.append(args[d.idx].detach().clone())
        else:
            tangents.append(torch.ones(n.meta["val"].shape))
    with torch.no_grad():
        outs, _ = gm(list(primals), tangents)
        for i, placeholder in _oracle(gm):  # the runtime's epilogue: input.copy_(output)
            primals[names.index(placeholder)].copy_(outs[i])

    eager_mod, eager_args = copy.deepcopy(mod), tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
    eager_mod(*eager_args)
    after = [*(p for p in eager_mod.parameters()), *eager_mod.buffers(), *eager_args]
    for got, want in zip(primals, after, strict=True):
        torch.testing.assert_close(got, want.detach())
    # a module with no mutation has an empty plan, and then nothing may change
    if not _oracle(gm):
        for got, before in zip(primals, [*mod.parameters(), *mod.buffers(), *args]):
            assert torch.equal(got, before.detach())
