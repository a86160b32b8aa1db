"""Lesson 5's claims, checked against torch and against memory itself.

- Does the reference answer of exercise 5.3 (and course's ``_get_sid`` + ``_overlaps``)
  say "alias" exactly when writing one view changes the other, on random views?
- Does torch's context give a wrong gradient exactly where its data_ptr rule misses an
  overlapping write, and course's context the unmutated gradient on every pair of 5.3?
- Does the reference mode of exercise 5.2 keep the same value that course's context
  clones before a mul_ of a saved tensor?
- Does the program of exercise 5.1 leave course's and torch's contexts in the states the
  lesson prints?
- Does exercise 5.2's oracle (the same clones seen by a TorchFunctionMode, one layer above
  dispatch) pass the reference and a right mode written differently, and fail every known
  wrong mode?
- Do torch's context and course's clone on the same writes of exercise 5.4, writes into x's
  memory whatever its version counter says?
- Does backward outside the context fail on the global switch alone, state intact (torch's
  unpack checks the switch first), in torch and in course?
"""

import pytest
import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd.mutation as cm
import course.autograd_graph as cg
from course.autograd.mutation import _get_sid
from course.autograd.overlap import overlaps as _overlaps
from course.checks import get, grade_answer
from course.checks.lesson05.ex5_2_clone_before_mul import MUL_PROGRAMS
from course.checks.lesson05.ex5_3_same_saved_tensor import _written_through
from course.checks.solutions.lesson05 import CloneBeforeMul, same_saved_tensor
from course.content.lesson05 import SAVED_X_WRITES, VIEW_PAIRS

pytestmark = pytest.mark.lesson05


@st.composite
def views(draw, base):
    """A random view of ``base`` (3, 4): a select, a strided slice, a transpose or a flat slice."""
    kind = draw(st.sampled_from(["whole", "select", "slice", "t", "flat"]))
    if kind == "whole":
        return base
    if kind == "select":
        dim = draw(st.integers(0, 1))
        return base.select(dim, draw(st.integers(0, base.shape[dim] - 1)))
    if kind == "t":
        return base.t()[draw(st.integers(0, 3))]
    if kind == "flat":
        start = draw(st.integers(0, 11))
        return base.view(12)[start : draw(st.integers(start + 1, 12))]
    dim = draw(st.integers(0, 1))
    n = base.shape[dim]
    start = draw(st.integers(0, n - 1))
    stop = draw(st.integers(start + 1, n))
    return (
        base.narrow(dim, start, stop - start)[:: draw(st.integers(1, 2))]
        if dim == 0
        else base[:, start : stop : draw(st.integers(1, 2))]
    )


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_the_aliasing_rules_match_what_a_write_changes(data):
    base = torch.arange(12.0).reshape(3, 4)
    saved, mutated = data.draw(views(base)), data.draw(views(base))
    ours = same_saved_tensor(saved, mutated)
    courses = _get_sid(saved) == _get_sid(mutated) and _overlaps(saved, mutated)
    truth = _written_through(saved, mutated)  # writes: after the rules have been asked
    assert ours == truth and courses == truth


def _grad_after_write(allow, saved_expr, mutated_expr):
    torch.manual_seed(0)
    a = torch.randn(3, 4, requires_grad=True)
    with allow():
        ns = {"b": a.clone(), "c": a.clone()}
        out = (eval(saved_expr, ns) ** 2).sum()
        eval(mutated_expr, ns).mul_(3)
        out.backward()
    return a.grad


@pytest.mark.parametrize("saved_expr, mutated_expr", VIEW_PAIRS)
def test_torch_is_wrong_exactly_where_its_data_ptr_rule_misses_a_write(saved_expr, mutated_expr):
    oracle = _grad_after_write(lambda: torch.enable_grad(), saved_expr, "c")  # no overlap
    base = torch.arange(12.0).reshape(3, 4)
    ns = {"b": base, "c": base.clone()}
    saved, mutated = eval(saved_expr, ns), eval(mutated_expr, ns)
    overlap = same_saved_tensor(saved, mutated)
    torch_sees = saved.data_ptr() == mutated.data_ptr()
    ours = _grad_after_write(cg.allow_mutation_on_saved_tensors, saved_expr, mutated_expr)
    theirs = _grad_after_write(tg.allow_mutation_on_saved_tensors, saved_expr, mutated_expr)
    assert torch.allclose(ours, oracle)
    assert torch.allclose(theirs, oracle) == (torch_sees or not overlap)


@pytest.mark.parametrize("program", ["x.mul_(2)", "x.mul_(2); x.mul_(3)", "x.add_(1); x.mul_(y)"])
def test_the_reference_mode_keeps_what_courses_context_clones(program):
    w = torch.ones(3, requires_grad=True)
    x, y = torch.arange(1.0, 4.0), torch.full((3,), 5.0)
    with cg.allow_mutation_on_saved_tensors() as ctx:
        _ = (w * x).sum()  # MulBackward0 saves x
        with CloneBeforeMul({"x": x}) as mode:
            MUL_PROGRAMS[program](x, y)
        cloned = list(ctx.cloned.values())
    first_write = "add_" if program.startswith("x.add_") else "mul_"
    assert len(cloned) == 1
    if first_write == "mul_":  # both keep the value from before the first write
        assert torch.equal(cloned[0], mode.cloned["x"])
    else:  # the context clones before add_; the mode only watches mul_
        assert torch.equal(cloned[0], torch.arange(1.0, 4.0))
        assert torch.equal(mode.cloned["x"], torch.arange(2.0, 5.0))


def test_exercise_5_1_states_course_and_torch():
    clone_state = get("5.1").oracle
    assert clone_state() == {"b": "cloned", "c": "cloned", "q": "original", "e1": "original"}
    theirs = clone_state(context=tg.allow_mutation_on_saved_tensors)
    assert theirs == {"b": "cloned", "c": "original", "q": "original", "e1": "original"}


def test_the_oracle_of_5_2_is_not_the_reference_and_tells_wrong_from_right():
    """5.2's oracle sees the ops one layer up (torch's function layer): a wrong mode fails
    against it, the reference and a right mode written differently pass."""
    ex = get("5.2")
    assert ex.oracle is not ex.solution and not issubclass(ex.oracle, ex.solution)
    assert grade_answer(ex, ex.solution).status == "passed"
    assert all(grade_answer(ex, right).status == "passed" for right in ex.right)
    assert all(grade_answer(ex, w.answer).status == "failed" for w in ex.wrong)


def _clones_and_versions(allow):
    """Each write of 5.4 after ``w * x`` saved x: (clones made, versions x moved)."""
    seen = []
    for line in SAVED_X_WRITES:
        w = torch.ones(2, 3, requires_grad=True)
        ns = {
            "torch": torch,
            "increment_version": cg.increment_version,
            "x": torch.arange(6.0).reshape(2, 3),
            "y": torch.zeros(2, 3),
        }
        with allow() as ctx:
            out = (w * ns["x"]).sum()
            version = ns["x"]._version
            exec(line, ns)
            seen.append((len(ctx.cloned), ns["x"]._version - version))
            out.backward()
        assert torch.equal(w.grad, torch.arange(6.0).reshape(2, 3)), line
    return seen


def test_exercise_5_4_clones_follow_writes_into_memory_not_versions_in_both_contexts():
    """Torch's context and course's clone on the same writes of 5.4, and a clone is neither
    implied nor excluded by a moved version counter (.data moves none, increment_version one)."""
    ours, theirs = (
        _clones_and_versions(cg.allow_mutation_on_saved_tensors),
        _clones_and_versions(tg.allow_mutation_on_saved_tensors),
    )
    assert [c for c, _ in ours] == [c for c, _ in theirs]
    assert [c > 0 for c, _ in ours] == get("5.4").oracle()
    assert any(c and not v for c, v in ours) and any(v and not c for c, v in ours)


@pytest.mark.parametrize("module, switch_owner", [(tg, tg), (cg, cm)], ids=["torch", "course"])
def test_backward_outside_fails_on_the_global_switch_before_any_state_is_read(module, switch_owner):
    """Lesson 5: with the state intact but the switch off, unpack already refuses."""
    a = torch.randn(2, 3, requires_grad=True)
    with module.allow_mutation_on_saved_tensors() as ctx:
        out = (a.clone() ** 2).sum()
        assert len(ctx.original) == 1
        switch_owner._allow_mutation_on_saved_tensors_enabled = False
        try:
            with pytest.raises(AssertionError, match="outside of the 'allow_mutation_on_saved_tensors'"):
                out.backward()
        finally:
            switch_owner._allow_mutation_on_saved_tensors_enabled = True
    assert not switch_owner._allow_mutation_on_saved_tensors_enabled
