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
- is exercise 6.4's oracle eager mode with its side effects (buffers written where the
  program writes), does the reference, playing torch's runtime on the joint graph (``copy_``
  each mutation output into the caller's tensor), leave the caller's tensors as eager mode
  does on every case, and does the oracle fail every known wrong answer?
"""

import pytest
import torch

from course.aot import descriptors as cd
from course.aot.joint import export_joint
from course.checks import get, grade_answer
from course.checks.lesson06.ex6_1_make_joint import (
    FUNCTIONS,
    _backward,
    _backward_then_wipe,
    _eager,
    _primals_and_tangents,
    _run_traced,
)
from course.checks.lesson06.ex6_3_predicted_placeholders import _accumulate_placeholders
from course.checks.lesson06.ex6_4_apply_mutations import MODULES, _eager_side_effects, _run_joint
from course.checks.solutions.lesson06 import apply_mutations, make_joint
from course.content.lesson06 import Accumulate, accumulate_args, seeded
from course.content.zoo import export_graph_module

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
    theirs = export_graph_module(bn, (x,))
    tangents = [n for n in theirs.graph.find_nodes(op="placeholder") if "tangents" in n.name]
    assert len(tangents) == 1
    assert export_joint(bn, (x,)).tangent_mask == [False, False, False, True]
    outs = torch.ops.aten._native_batch_norm_legit_functional.default(
        x, bn.weight, bn.bias, bn.running_mean.clone(), bn.running_var.clone(), True, 0.1, 1e-5
    )
    assert [o.requires_grad for o in outs] == [True, False, False, False, False]
    assert (0.9 * bn.running_mean + 0.1 * x.mean(0)).requires_grad  # the same update, by hand


def test_the_6_3_truth_is_what_course_joint_builds():
    torch.manual_seed(0)
    gm = export_joint(Accumulate(), accumulate_args()).graph_module
    assert [repr(n.meta["desc"]) for n in gm.graph.find_nodes(op="placeholder")] == _accumulate_placeholders()


@pytest.mark.parametrize("c", get("6.4").all_cases, ids=lambda c: f"{c.args[0]}-{c.args[1]}")
def test_the_6_4_oracle_is_eager_mode_with_its_side_effects(c):
    """6.4's oracle runs the module eagerly: its buffers and inputs move exactly where the
    program writes (and nowhere else), and the reference, playing the runtime on the joint
    graph, leaves the caller's tensors the same."""
    name, exporter = c.args
    mod, args = seeded(*MODULES[name])
    before = {n: b.clone() for n, b in mod.named_buffers()}, [a.detach().clone() for a in args]
    expected = _eager_side_effects(name, exporter)
    for n, b in expected["the caller's buffers"].items():
        written = n.rsplit(".", 1)[-1] in {
            "running_mean",
            "running_var",
            "num_batches_tracked",
            "steps",
            "total",
            "calls",
        }
        assert torch.equal(b, before[0][n]) != written, n
    ours = _run_joint(apply_mutations, name, exporter)
    for key in ("the caller's buffers", "the caller's inputs"):
        for got, want in zip(_values(ours[key]), _values(expected[key]), strict=True):
            torch.testing.assert_close(got, want)
    for got, want in zip(ours["returned"], expected["returned"], strict=True):
        torch.testing.assert_close(got, want)


def _values(held):
    return list(held.values()) if isinstance(held, dict) else list(held)


def test_the_6_4_oracle_tells_every_wrong_answer_from_the_right_ones():
    ex = get("6.4")
    assert ex.oracle is not ex.solution
    assert grade_answer(ex, ex.solution).status == "passed"
    assert all(grade_answer(ex, right).status == "passed" for right in ex.right)
    assert all(grade_answer(ex, w.answer).status in ("failed", "error") for w in ex.wrong)
