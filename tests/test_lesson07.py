"""Are lesson 7's checks honest? Torch's eager autograd is the judge of the check machinery.

The generic tests (tests/test_checks.py) already ask whether each solution passes, each stub
is "not attempted" and each known wrong answer fails with its hint. Here we ask whether what
the checks *compare against* is right:

- does running a joint graph the way the checks do (``call_joint``: primals looked up by
  descriptor) give eager autograd's outputs, gradients and buffer updates, for every module
  the checks export?
- does exercise 7.4's oracle (torch's graph run untouched, then parameter grads scaled) equal
  eager ``p.grad * factor``?
- is exercise 7.3's expected answer what ``requires_grad`` and use say it should be? Does its
  oracle (eager autograd, no graph) tell every known wrong answer from the right ones?
- is exercise 7.2's truth torch's nesting, each descriptor legal by ``validate``?
"""

import copy

import pytest
import torch
from torch.utils import _pytree as pytree

from course.aot import descriptors as cd
from course.checks import get
from course.checks.lesson07._shared import MODULES, call_joint, joint_case, tangents_for
from course.checks.lesson07.ex7_4_scale_param_grads import _ScaledAfterRunning

pytestmark = [pytest.mark.lesson07]


def _eager(name):
    """Eager outputs, grads (summed per Parameter object) and buffers after one forward+backward."""
    mod, args, gm = joint_case(name)
    mod = copy.deepcopy(mod)
    args = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
    outs = pytree.tree_leaves(mod(*args))
    tangents = dict(
        zip(
            [
                cd.from_torch(n.meta["desc"]).output
                for n in gm.graph.find_nodes(op="placeholder")
                if cd.from_torch(n.meta["desc"]).is_tangent()
            ],
            tangents_for(gm),
        )
    )
    pairs = [(outs[d.idx], t) for d, t in tangents.items()]
    torch.autograd.backward([o for o, _ in pairs], [t for _, t in pairs])
    return mod, args, outs


@pytest.mark.parametrize("name", sorted(MODULES))
def test_running_a_joint_graph_by_descriptor_gives_eager_autograds_values(name):
    mod, args, gm = joint_case(name)
    results = {eval(k, vars(cd)): v for k, v in call_joint(gm, mod, args, tangents_for(gm)) if k != "None"}
    emod, eargs, eouts = _eager(name)
    for d, value in results.items():
        if isinstance(d, cd.PlainAOTOutput):
            expected = eouts[d.idx].detach()
        elif isinstance(d, cd.InputMutationAOTOutput):
            expected = emod.get_buffer(d.mutated_input.target)
        elif isinstance(d.grad_of, cd.PlainAOTInput):
            expected = eargs[d.grad_of.idx].grad
        else:  # a tied Parameter is one tensor under two names: eager sums the partial grads
            p = emod.get_parameter(d.grad_of.target)
            partial = [
                v
                for k, v in results.items()
                if isinstance(k, cd.GradAOTOutput)
                and isinstance(k.grad_of, cd.ParamAOTInput)
                and emod.get_parameter(k.grad_of.target) is p
                and v is not None
            ]
            value, expected = (sum(partial) if partial else None), p.grad
        if expected is None:
            assert value is None, d
        else:
            torch.testing.assert_close(value.to(expected.dtype), expected, atol=1e-5, rtol=1e-5, msg=repr(d))
    assert len(results) >= 2


@pytest.mark.parametrize("name, factor", [(c.args[0], c.args[1]) for c in get("7.4").all_cases])
def test_the_scaling_oracle_equals_eager_param_grads_times_the_factor(name, factor):
    mod, args, gm = joint_case(name)
    results = dict(call_joint(_ScaledAfterRunning(gm, factor), mod, args, tangents_for(gm)))
    emod, _, _ = _eager(name)
    for fqn, p in emod.named_parameters():  # 7.4's cases tie no weights: one name, one grad
        got = results.get(repr(cd.GradAOTOutput(cd.ParamAOTInput(fqn))))  # frozen: no slot at all
        if p.grad is None:
            assert got is None, fqn
        else:
            torch.testing.assert_close(got, factor * p.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("c", get("7.3").all_cases, ids=lambda c: c.args[0])
def test_params_without_grad_are_the_frozen_and_the_unused_ones(c):
    mod, args, gm = joint_case(c.args[0])
    emod, _, _ = _eager(c.args[0])
    # eager: a parameter gets no .grad if it is frozen or forward never uses it
    expected = [
        fqn
        for fqn, p in emod.named_parameters(remove_duplicate=False)
        if emod.get_parameter(fqn).grad is None
    ]
    assert get("7.3").solution(gm) == expected


# --- The checks as a learner meets them -----------------------------------------------------


def _cyclic_pass(gm, factor):
    """A broken pass: replace_all_uses_with also rewires the new mul to itself (FX then prints
    the generated code and a traceback when the graph runs)."""
    from course.aot import fx_utils as cf

    out = gm.graph.output_node()
    with gm.graph.inserting_before(out):
        for _, (_, grad) in cf.get_param_and_grad_nodes(gm.graph).items():
            if grad is not None:
                grad.replace_all_uses_with(gm.graph.call_function(torch.ops.aten.mul.Tensor, (grad, factor)))
    gm.recompile()
    return gm


def _odd_pass(gm, factor):
    """A wrong pass that matches no known mistake: it scales only the first output."""
    out = gm.graph.output_node()
    outs = list(out.args[0])
    with gm.graph.inserting_before(out):
        outs[0] = gm.graph.call_function(torch.ops.aten.mul.Tensor, (outs[0], factor))
    out.args = (outs,)
    gm.recompile()
    return gm


@pytest.mark.parametrize("answer", [_cyclic_pass, _odd_pass])
def test_a_failing_7_4_check_prints_only_its_verdict(answer, capsys):
    """Does a failing 7.4 check print a short verdict, with nothing from its own probes
    (FX's code dumps and tracebacks) and no reference code in the hint?"""
    from course.checks import check

    check("7.4", answer)
    printed = capsys.readouterr()
    lines = printed.out.strip().splitlines()
    assert lines[0].startswith("[7.4 scale_param_grads] ") and "passed" not in lines[0]
    assert len(lines) <= 15 and not printed.err.strip()
    assert "Traceback" not in printed.out and "def forward" not in printed.out


def test_no_7_x_fallback_hint_prints_code():
    """Is every 7.x fallback hint (the one for an answer that matches no known mistake)
    conceptual: no op, graph method or fx_utils call, and no line of the reference solution?"""
    import inspect

    from course.checks import all_exercises

    code_like = ("aten.", "call_function(", "inserting_before(", "recompile()", "get_param_and_grad_nodes(")
    for ex in all_exercises(7):
        assert ex.hint and not any(c in ex.hint for c in code_like), (ex.id, ex.hint)
        if callable(ex.solution):
            body = [ln.strip() for ln in inspect.getsource(ex.solution).splitlines()[1:]]
            assert not any(len(ln) > 15 and ln in ex.hint for ln in body), ex.id


@pytest.mark.parametrize(
    "spelled",
    [
        [
            'ParamAOTInput(target="lin.weight")',
            "ParamAOTInput( target = 'lin.bias' )",
            'BufferAOTInput("scale")',
            "PlainAOTInput(0)",
            "PlainAOTInput(idx=1)",
            "TangentAOTInput(PlainAOTOutput(0))",
        ],
        (
            cd.ParamAOTInput("lin.weight"),
            cd.ParamAOTInput("lin.bias"),
            cd.BufferAOTInput("scale"),
            cd.PlainAOTInput(0),
            cd.PlainAOTInput(1),
            cd.TangentAOTInput(cd.PlainAOTOutput(0)),
        ),
    ],
)
def test_7_1_reads_predictions_in_any_spelling(spelled):
    """Is the right 7.1 prediction accepted in another spelling, as strings or objects?"""
    from course.checks import grade_answer

    assert grade_answer(get("7.1"), spelled).status == "passed"


def test_views_returned_by_one_function_cannot_be_written_in_place():
    """Lesson 07's reason for IntermediateBaseAOTOutput: autograd refuses an in-place write to
    one of several views returned by a single autograd.Function (what a compiled graph is),
    while the same views made outside it (eager) take the write and replay the view."""

    class TwoViews(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            return y[:2], y[1:]

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return None

    x = torch.randn(3, requires_grad=True)
    a, _ = TwoViews.apply(x)
    with pytest.raises(RuntimeError, match="view"):
        a.mul_(10)
    y = x * 2
    a, b = y[:2], y[1:]
    a.mul_(10)
    assert type(b.grad_fn).__name__ == "AsStridedBackward0"


def test_the_oracle_of_7_3_runs_no_graph_and_tells_a_wrong_answer_from_a_right_one():
    """7.3's oracle is eager autograd on the module (no joint graph, no fx_utils): the reference
    and a right answer written differently agree with it on every case; each known wrong
    answer disagrees on at least one."""
    from course.checks import grade_answer, outcomes_of

    ex = get("7.3")
    assert ex.oracle is not ex.solution
    expected = outcomes_of(ex, ex.oracle)
    assert outcomes_of(ex, ex.solution) == expected
    assert all(grade_answer(ex, right).status == "passed" for right in ex.right)
    assert all(outcomes_of(ex, w.answer) != expected for w in ex.wrong)


def test_7_2s_truth_is_torchs_nesting_and_every_one_of_them_validates():
    """7.2's truth is read off torch's graphs (found by its parts, whatever their order): the
    outer wrapper is always the later stage, and course's validate accepts each."""
    from course.checks.descriptor_answers import descriptor_repr

    truth = get("7.2").oracle()
    assert len(truth) == 4
    for text in truth:
        d = eval(text, vars(cd))
        cd.validate(d)
        assert descriptor_repr(d) == text
    assert truth[1].startswith("SubclassGetAttrAOTOutput(base=GradAOTOutput(")
    assert truth[3] == repr(cd.TangentAOTInput(cd.PlainAOTOutput(0)))  # the token is not counted
