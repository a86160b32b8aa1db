"""Are lesson 7's checks honest? Torch's eager autograd is the judge of the check machinery.

The generic tests (tests/test_checks.py) already ask whether each solution passes, each stub
is "not attempted" and each known wrong answer fails with its hint. Here we ask whether what
the checks *compare against* is right:

- does running a joint graph the way the checks do (``call_joint``: primals looked up by
  descriptor) give eager autograd's outputs, gradients and buffer updates, for every module
  the checks export?
- does exercise 7.4's oracle (torch's graph run untouched, then parameter grads scaled) equal
  eager ``p.grad * factor``?
- is exercise 7.3's expected answer what ``requires_grad`` and use say it should be?
"""

import copy

import pytest
import torch
from torch.utils import _pytree as pytree

from course.aot import descriptors as cd
from course.checks import get
from course.checks.lesson07 import MODULES, _ScaledAfterRunning, call_joint, joint_case, tangents_for

pytestmark = [pytest.mark.lesson07]


def _eager(name):
    """Eager outputs, grads (summed per Parameter object) and buffers after one forward+backward."""
    mod, args, gm = joint_case(name)
    mod = copy.deepcopy(mod)
    args = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
    outs = pytree.tree_leaves(mod(*args))
    tangents = dict(zip([cd.from_torch(n.meta["desc"]).output for n in gm.graph.find_nodes(op="placeholder")
                         if cd.from_torch(n.meta["desc"]).is_tangent()], tangents_for(gm)))
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
            partial = [v for k, v in results.items() if isinstance(k, cd.GradAOTOutput)
                       and isinstance(k.grad_of, cd.ParamAOTInput)
                       and emod.get_parameter(k.grad_of.target) is p and v is not None]
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
    expected = [fqn for fqn, p in emod.named_parameters(remove_duplicate=False)
                if emod.get_parameter(fqn).grad is None]
    assert get("7.3").solution(gm) == expected
