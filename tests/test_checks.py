"""Does every registered exercise accept its solution and call a stub "not attempted"? And
does the check machinery (outcomes, comparison, predictions, cost budgets) judge the way it
says?

The generic tests iterate over EVERY exercise of every course/checks/lessonNN/, so a lesson
author gets them for free by registering the exercise. Each exercise's catalogue (every known
wrong answer fails with its own hint, every right answer passes) is judged through the grader
in tests/test_catalogue_grade.py.
"""

import ast
import importlib
import io
import json
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course import checks
from course.checks import MISSING, PLACEHOLDER, Exercise, case, check, grade_answer, wrong
from course.checks.leftovers import ADVICE
from course.checks.outcomes import encode, same, show, value_outcome
from course.house import sources as house_sources
from course.house.rules import offence

EXERCISES = checks.all_exercises()


def _stub(ex):
    """What the learner copy holds before any work: the stub raising NotImplementedError."""
    if ex.kind == "predict":
        return PLACEHOLDER  # the learner copy's stub: predicted_x = ...

    def stub(*args, **kwargs):
        raise NotImplementedError(f"exercise {ex.id}")

    return stub


def test_every_lesson_module_registers_exercises():
    assert "course.checks.lesson00" in checks.lesson_modules()
    lessons = {ex.lesson for ex in EXERCISES}
    for module in checks.lesson_modules():
        assert int(module[-2:]) in lessons, f"{module} registers no exercise"


@pytest.mark.parametrize("ex", EXERCISES, ids=[e.id for e in EXERCISES])
def test_the_reference_solution_passes(ex):
    result = grade_answer(ex, ex.solution)
    assert result.status == "passed", result.message
    assert result.score == ex.points and result.cases_passed == result.cases_total


@pytest.mark.parametrize("ex", EXERCISES, ids=[e.id for e in EXERCISES])
def test_the_stub_is_not_attempted(ex):
    result = grade_answer(ex, _stub(ex))
    assert result.status == "not attempted", result.message
    assert result.score == 0


@pytest.mark.parametrize("ex", [e for e in EXERCISES if e.kind == "predict"], ids=lambda e: e.id)
def test_an_undefined_prediction_is_not_attempted_too(ex):
    assert grade_answer(ex, MISSING).status == "not attempted"


@pytest.mark.parametrize("ex", [e for e in EXERCISES if e.kind == "function"], ids=lambda e: e.id)
def test_the_fallback_hint_never_prints_the_reference_solution(ex):
    offences = house_sources.solution_lines_in_hint(ex)
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_every_known_wrong_answer_is_written_out(ex):
    offences = house_sources.wrong_answers_not_written_out(ex)
    assert offences == [], "\n".join(offences)


def test_check_prints_passed_failed_and_not_attempted(capsys):
    ex = checks.get("0.2")
    check("0.2", ex.solution)
    check("0.2", ex.wrong[0].answer)
    check("0.2")  # looks the name up here, where it is not defined
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[0.2 predicted_a_grad] passed")
    assert out[1].startswith("[0.2 predicted_a_grad] failed")
    assert _words(_hint_block(out)) == ex.wrong[0].hint.split()
    assert out[-1].startswith("[0.2 predicted_a_grad] not attempted")


def _hint_block(lines: list[str]) -> list[str]:
    """The lines of a verdict that hold its hint: the `hint:` line and those indented under it."""
    start = next(i for i, line in enumerate(lines) if line.startswith("  hint:     "))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 12) or line[12:13] == " ":
            break
        block.append(line)
    return block


def _words(block: list[str]) -> list[str]:
    return " ".join(line[12:] for line in block).split()


def _without_hint(message: str) -> str:
    lines = message.splitlines()
    block = _hint_block(lines)
    start = lines.index(block[0])
    return "\n".join(lines[:start] + lines[start + len(block) :])


_HINT_WORDS = st.lists(st.text("abcxyz_.,()'0:", min_size=1, max_size=24), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(words=_HINT_WORDS, long_word=st.text("abc_.", min_size=0, max_size=100), at=st.integers(0, 20))
def test_a_long_hint_wraps_between_words_and_stays_under_its_label(words, long_word, at):
    """A hint is broken at spaces only, each line as full as the next word allows, and every
    line after the first starts in the hint's column, so the learner reads it as one block."""
    words = words[:at] + [long_word] + words[at:] if long_word else words
    hint = " ".join(words)
    ex = Exercise(
        id="9.1",
        name="double",
        title="Double it",
        solution=lambda x: 2 * x,
        cases=[case(3)],
        wrong=[wrong(lambda x: x + 1, hint)],
    )
    block = _hint_block(grade_answer(ex, lambda x: x + 1).message.splitlines())
    assert _words(block) == words  # nothing cut, lost or added
    assert block[0].startswith("  hint:     ") and all(line.startswith(" " * 12) for line in block[1:])
    for line, after in zip(block, block[1:] + [None]):
        assert len(line) <= checks.WIDTH or len(line[12:].split()) == 1, (
            line
        )  # only a lone long word sticks out
        if after is not None:  # the next line's first word would not have fitted on this one
            assert len(line) + 1 + len(after[12:].split()[0]) > checks.WIDTH, (line, after)


def test_check_finds_the_answer_by_name_in_the_callers_namespace(capsys):
    namespace = {"check": check, "predicted_a_grad": checks.get("0.2").solution}
    exec('check("0.2")', namespace)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "answer",
    [lambda x: 1 / 0, lambda x: object(), "not a function", lambda: None, lambda x: torch.ones(7)],
    ids=["raises", "odd-object", "not-callable", "wrong-arity", "wrong-shape"],
)
def test_check_never_raises(answer, capsys):
    check("0.1", answer)
    out = capsys.readouterr().out
    assert out.startswith("[0.1 cube_sum_grad] ") and ("failed" in out or "error" in out)


def test_an_unknown_exercise_is_reported_not_raised(capsys):
    check("42.7", lambda x: x)
    assert "could not be checked" in capsys.readouterr().out


def test_an_answer_that_mutates_its_input_cannot_change_the_next_case():
    ex = Exercise(
        id="98.1",
        name="f",
        title="t",
        solution=lambda x: x.sum(),
        may_leave={"version"},
        cases=[case(torch.ones(3)), case(torch.ones(3))],
        wrong=[wrong(0, "h")],
    )

    def mutating(x):
        out = x.sum()
        x.mul_(10)
        return out

    assert grade_answer(ex, mutating).status == "passed"  # the spec allows it; the next case has fresh copies
    strict = Exercise(
        id="98.1",
        name="f",
        title="t",
        solution=lambda x: x.sum(),
        cases=[case(torch.ones(3))],
        wrong=[wrong(0, "h")],
    )
    result = grade_answer(strict, mutating)
    assert result.status == "failed" and "left:     left behind: x was changed in place" in result.message


def test_a_hidden_case_failure_is_labelled_hidden():
    ex = Exercise(
        id="98.2",
        name="f",
        title="t",
        solution=lambda x: x.abs(),
        cases=[case(torch.tensor([1.0]))],
        hidden=[case(torch.tensor([-1.0]), label="a negative entry")],
        wrong=[wrong(lambda x: x, "abs of a negative number is positive")],
    )
    result = grade_answer(ex, lambda x: x)
    assert "a negative entry (hidden case)" in result.message
    assert result.hint == "abs of a negative number is positive"


# --- predictions -------------------------------------------------------------------------


def test_a_prediction_of_an_error_is_checked_against_what_torch_raises():
    def second_backward_without_retain():
        a = torch.tensor(2.0, requires_grad=True)
        c = a * a
        c.backward()
        c.backward()  # the saved tensors are freed: torch raises RuntimeError

    ex = Exercise(
        id="98.3",
        name="p",
        title="t",
        kind="predict",
        solution=RuntimeError,
        oracle=second_backward_without_retain,
        wrong=[wrong(8.0, "the graph is freed")],
    )
    assert grade_answer(ex, RuntimeError).status == "passed"
    assert grade_answer(ex, ValueError).status == "failed"
    assert grade_answer(ex, 8.0).hint == "the graph is freed"


@pytest.mark.parametrize("answer", [8.0, 8, torch.tensor(8.0)])
def test_a_numeric_prediction_may_be_written_as_a_number_or_a_tensor(answer):
    assert grade_answer(checks.get("0.2"), answer).status == "passed"


# --- cost-graded exercises -----------------------------------------------------------------


def _run_with_hooks(hooks, x):
    pack, unpack = hooks
    x = x.detach().requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x.sin() * x).sum()
    y.backward()
    return x.grad


def _saved_bytes(hooks, x):
    pack, unpack = hooks
    total = 0

    def counting_pack(t):
        nonlocal total
        packed = pack(t)
        total += packed.numel() * packed.element_size() if isinstance(packed, torch.Tensor) else 0
        return packed

    _run_with_hooks((counting_pack, unpack), x)
    return {"saved bytes": total}


HALF = (lambda t: t.to(torch.float16), lambda p: p.to(torch.float32))
IDENTITY = (lambda t: t, lambda p: p)
COST_EXERCISE = Exercise(
    id="98.4",
    name="hooks",
    title="Save half the bytes",
    solution=HALF,
    run=_run_with_hooks,
    cost=_saved_bytes,
    budget={"saved bytes": 24},
    rtol=1e-2,
    atol=1e-2,
    cases=[case(torch.linspace(-1, 1, 4))],
    wrong=[wrong(IDENTITY, "saving float32 as is keeps every byte: pack to a smaller dtype")],
)


def test_a_cost_graded_answer_passes_within_budget_and_reports_its_cost():
    result = grade_answer(COST_EXERCISE, HALF)
    assert result.status == "passed", result.message
    assert result.cost == {"saved bytes": 24.0}  # x.sin() and x saved: 2 tensors * 4 * 2 bytes
    assert "saved bytes 24.0 (budget 24)" in result.message


def test_a_correct_answer_over_budget_fails_with_the_cost_hint():
    result = grade_answer(COST_EXERCISE, IDENTITY)
    assert result.status == "failed" and result.cases_passed == result.cases_total
    assert "over budget" in result.message and "saved bytes 48.0 (budget 24)" in result.message
    assert result.hint.startswith("saving float32 as is")


# --- outcomes ------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=6),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_a_tensor_outcome_equals_itself_and_survives_a_weights_only_round_trip(values, dtype):
    t = torch.tensor(values, dtype=dtype, requires_grad=True) * 1
    buffer = io.BytesIO()
    torch.save(value_outcome((t, {"grad": t, 1: None}, RuntimeError, t.dtype)), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert same(loaded, value_outcome((t.detach().clone(), {"grad": t, 1: None}, RuntimeError, dtype))) == (
        True,
        "",
    )


def test_outcomes_compare_shape_and_dtype_strictly_and_values_with_tolerance():
    a = value_outcome(torch.ones(2))
    assert same(a, value_outcome(torch.ones(3)))[1] == "shape (2,), expected (3,)"
    assert same(a, value_outcome(torch.ones(2, dtype=torch.float64)))[1].startswith("dtype")
    assert same(a, value_outcome(torch.ones(2) + 1e-7)) == (True, "")
    assert same(value_outcome(True), value_outcome(1)) == (True, "")  # Python's True == 1
    assert same(value_outcome(torch.tensor([True, True])), value_outcome((3, 1)))[0] is False


def test_a_learner_object_with_a_broken_repr_is_encoded_not_raised():
    class Nasty:
        def __repr__(self):
            raise RuntimeError("no")

    assert encode(Nasty()) == {"repr": "<unrepresentable RuntimeError>"}


# --- one rule for the form of an answer (docs/authoring.md, "How answers compare") ------------


def _prediction(truth, **fields):
    return Exercise(
        id="97.1",
        name="p",
        title="t",
        kind="predict",
        solution=truth(),
        oracle=truth,
        wrong=[wrong("a wrong value", "a hint")],
        **fields,
    )


@pytest.mark.parametrize(
    "answer, truth",
    [
        (8, 8.0),
        (True, 1),
        ([1, 0, 1], [True, False, True]),
        (("a", "b"), ["a", "b"]),
        ({"k": [[1.0, 2.0]]}, {"k": [(1.0, 2.0)]}),
        (8, torch.tensor(8.0)),
        ([1.0, 2.0], torch.tensor([1.0, 2.0])),
    ],
    ids=[
        "int-for-float",
        "bool-for-int",
        "ints-for-bools",
        "tuple-for-list",
        "nested",
        "int-for-tensor",
        "list-for-tensor",
    ],
)
def test_python_equal_plain_values_are_accepted(answer, truth):
    assert grade_answer(_prediction(lambda: truth), answer).status == "passed"


@pytest.mark.parametrize(
    "answer, truth, form",
    [
        ("RuntimeError", RuntimeError, "the exception class RuntimeError (not a string)"),
        ("8.0", 8.0, "a float"),
        (torch.tensor([1, 2]), torch.tensor([1.0, 2.0]), "a float32 tensor of shape (2,)"),
        (torch.tensor(8), torch.tensor(8.0), "a float (or a float32 tensor)"),
        ([("a", True)], {"a": True}, "a dict from strings to bools"),
        (" mul  pre", "mul pre", None),
        (["Z", "x"], ["z", "x"], None),
    ],
    ids=[
        "string-for-exception",
        "string-for-float",
        "int-tensor",
        "int-0d-tensor",
        "pairs-for-dict",
        "spaces",
        "upper-case",
    ],
)
def test_a_right_value_in_another_form_fails_with_a_message_naming_the_form(answer, truth, form):
    result = grade_answer(_prediction(lambda: truth), answer)
    assert result.status == "failed"
    if form is None:  # a string spelled differently: named as such, never spelled out
        assert result.hint.startswith("the right words, spelled differently") and "'z'" not in result.message
    else:
        assert result.hint == f"right value, give it as {form}."


@settings(max_examples=40, deadline=None)
@given(value=st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: v != int(v)))
def test_an_int_is_exact_whatever_the_tolerance(value):
    lenient = _prediction(lambda: value, rtol=0.5, atol=1.0)
    assert grade_answer(lenient, int(value)).status == "failed"  # a truncation is not the value
    assert grade_answer(lenient, value).status == "passed"


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.integers(-5, 5), min_size=1, max_size=5),
    dtype=st.sampled_from([torch.bool, torch.int64, torch.int32]),
)
def test_a_tensor_of_another_kind_never_passes_a_float_prediction(values, dtype):
    answer = torch.tensor(values).to(dtype)
    truth = [float(v) for v in answer.tolist()]
    assert grade_answer(_prediction(lambda: truth), answer).status == "failed"
    assert grade_answer(_prediction(lambda: truth), answer.double()).status == "passed"


def test_a_bool_tensor_does_not_pass_a_prediction_of_counts():
    result = grade_answer(checks.get("1.4"), torch.tensor([True, True, True]))
    assert result.status == "failed" and "dtype torch.bool" in result.message


def test_parse_reads_other_spellings_of_a_prediction_and_explains_what_it_cannot_read():
    def letter(answer):
        if not isinstance(answer, str) or answer.strip().upper() not in ("A", "B", "C"):
            raise ValueError("write one of the letters A, B or C")
        return answer.strip().upper()

    ex = _prediction(lambda: "C", parse=letter)
    assert grade_answer(ex, "c").status == "passed"
    result = grade_answer(ex, 3)
    assert result.status == "failed" and "write one of the letters A, B or C" in result.message


def test_a_placeholder_prediction_is_not_attempted_and_says_what_to_do(capsys):
    check("0.2", PLACEHOLDER)
    out = capsys.readouterr().out
    assert out.startswith("[0.2 predicted_a_grad] not attempted") and "in place of ..." in out


# --- messages that teach, and nothing else ------------------------------------------------------


def test_a_failing_check_prints_at_most_15_lines_whatever_it_returns(capsys):
    big = Exercise(
        id="97.2",
        name="f",
        title="t",
        solution=lambda x: (torch.ones(200, 300) * x, {"k": x}),
        cases=[case(2.0)],
        wrong=[wrong(lambda x: None, "h")],
        hint="a conceptual hint\n" * 20,
    )
    checks.registry._REGISTRY[big.id] = big
    try:
        check("97.2", lambda x: (torch.zeros(200, 300), {"k": "a long string " * 200}))
    finally:
        del checks.registry._REGISTRY[big.id]
    out = capsys.readouterr().out
    assert len(out.splitlines()) <= 15, out
    assert "max error 2 at index (0, 0), shape (200, 300)" in out or "tensor of shape (200, 300)" in out
    assert len(out) < 3000


def test_what_the_probes_print_never_reaches_the_cell(capsys):
    def noisy_oracle(x):
        print("the oracle talks")
        return x + 1

    def noisy_wrong(x):
        print("a known wrong answer talks")
        import warnings

        warnings.warn("and warns", stacklevel=2)
        return x

    ex = Exercise(
        id="97.3",
        name="f",
        title="t",
        solution=noisy_oracle,
        cases=[case(1)],
        wrong=[wrong(noisy_wrong, "add one")],
    )
    checks.registry._REGISTRY[ex.id] = ex
    try:
        check("97.3", lambda x: x - 1)
    finally:
        del checks.registry._REGISTRY[ex.id]
    captured = capsys.readouterr()
    assert "talks" not in captured.out + captured.err and "warns" not in captured.out + captured.err
    assert captured.out.startswith("[97.3 f] failed")


# --- what an answer leaves behind (course/checks/leftovers.py) ---------------------------------


class _PassThroughFunctionMode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _PassThroughDispatchMode(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _push_hooks():
    torch._C._autograd._push_saved_tensors_default_hooks(lambda t: t, lambda t: t)


#: Each kind of process-wide state an answer can leave behind, and the words that name it.
LEAKS = {
    "grad mode": (lambda: torch.set_grad_enabled(False), "grad mode turned off"),
    "anomaly mode": (lambda: torch.autograd.set_detect_anomaly(True), "anomaly mode turned on"),
    "saved-tensor hooks": (_push_hooks, "1 saved-tensor hook pair pushed and never popped"),
    "function mode": (lambda: _PassThroughFunctionMode().__enter__(), "1 torch function mode entered"),
    "dispatch mode": (lambda: _PassThroughDispatchMode().__enter__(), "1 torch dispatch mode entered"),
}


def _kernel():
    return (
        torch.is_grad_enabled(),
        torch.is_anomaly_enabled(),
        torch._C._autograd._top_saved_tensors_default_hooks(True),
        torch._C._len_torch_function_stack(),
        torch._C._len_torch_dispatch_stack(),
    )


def _leaky(answer, leak):
    """``answer``, which also leaves ``leak`` behind, on every call."""

    def leaky(*args, **kwargs):
        leak()
        return answer(*args, **kwargs)

    return leaky


@pytest.mark.parametrize("kind", list(LEAKS))
def test_an_answer_that_leaves_process_state_behind_fails_naming_it_and_the_state_is_put_back(kind, capsys):
    leak, words = LEAKS[kind]
    before = _kernel()
    check("0.1", _leaky(checks.get("0.1").solution, leak))
    out = capsys.readouterr().out
    assert out.startswith("[0.1 cube_sum_grad] failed") and f"left:     left behind: {words}" in out, out
    assert _kernel() == before  # the notebook's next cells run as they would have


@pytest.mark.parametrize("ex", [e for e in EXERCISES if e.kind == "function"], ids=lambda e: e.id)
def test_every_check_catches_the_kernel_left_changed(ex):
    """The reference solution, made to leave grad mode off and its saved-tensor hooks pushed:
    the first case records both (whatever else the leak breaks), and both are put back."""
    before = _kernel()

    def leak():
        torch.set_grad_enabled(False)
        _push_hooks()

    first = checks.outcomes_of(ex, _leaky(ex.solution, leak))[0]
    named = " ".join(sentence for _, sentence in first.get("left", []))
    assert "grad mode turned off" in named and "saved-tensor hook pair" in named, first
    assert _kernel() == before


def test_a_change_to_a_handed_in_tensor_is_named():
    ex = Exercise(
        id="98.5",
        name="f",
        title="t",
        solution=lambda w: (w * 2).sum().item(),
        cases=[case(torch.ones(2, requires_grad=True))],
        wrong=[wrong(0, "h")],
    )

    def freezes(w):
        w.requires_grad_(False)
        return (w * 2).sum().item()

    def fills_grad(w):
        (w * 2).sum().backward()
        return w.grad.sum().item()

    assert "w.requires_grad changed from True to False" in grade_answer(ex, freezes).message
    result = grade_answer(ex, fills_grad)
    assert result.status == "failed" and "w.grad now holds a gradient (was None)" in result.message
    assert result.hint == ADVICE["grad"]
    allowed = Exercise(
        id="98.5",
        name="f",
        title="t",
        solution=lambda w: 4.0,
        may_leave={"grad"},
        cases=[case(torch.ones(2, requires_grad=True))],
        wrong=[wrong(0, "h")],
    )
    assert grade_answer(allowed, fills_grad).status == "passed"


def test_a_run_watches_what_it_hands_the_answer_with_handed():
    def run(answer):
        model = torch.nn.Linear(2, 1)
        with checks.handed(model=model):
            return answer(model)

    ex = Exercise(
        id="98.6",
        name="f",
        title="t",
        solution=lambda m: m.weight.shape[1],
        run=run,
        cases=[case()],
        wrong=[wrong(0, "h")],
    )
    assert grade_answer(ex, lambda m: m.weight.shape[1]).status == "passed"
    hooked = grade_answer(ex, lambda m: (m.register_forward_hook(lambda *a: None), 2)[1])
    assert "model has +1 hooks registered on it" in hooked.message
    backward = grade_answer(ex, lambda m: (m(torch.ones(2)).sum().backward(), 2)[1])
    assert "model.weight.grad now holds a gradient" in backward.message


def test_an_answer_that_keeps_state_between_calls_fails_on_its_second_call():
    ex = Exercise(
        id="98.7",
        name="f",
        title="t",
        solution=lambda x: x + 1,
        cases=[case(1), case(2)],
        wrong=[wrong(0, "h")],
    )
    seen = []

    def remembers(x):  # right the first time only: a module-level list it never clears
        seen.append(x)
        return x + len(seen) if len(seen) > 2 else x + 1

    result = grade_answer(ex, remembers)
    assert result.status == "failed" and "it keeps state between calls" in result.message
    assert result.hint == ADVICE["repeat"]


# --- the hint a failing answer gets ------------------------------------------------------------


@pytest.mark.parametrize("ex", [e for e in EXERCISES if e.cost], ids=lambda e: e.id)
def test_a_correct_answer_over_budget_gets_a_cost_line_and_a_hint_never_a_crash(ex):
    yours = expected = checks.expected_outcomes(ex)
    over = {k: cap + 1 for k, cap in ex.budget.items()}
    result = checks.judge(ex, yours, expected, over)
    assert result.status == "failed" and "over budget" in result.message
    assert all(f"cost:     {k} {cap + 1} (budget {cap})" in result.message for k, cap in ex.budget.items())
    assert result.hint and "hint:" in result.message


def test_right_value_in_another_form_names_the_differing_part_not_the_whole():
    ex = checks.get("0.1")
    result = grade_answer(ex, lambda x: checks.get("0.1").solution(x.double()).to(torch.float64))
    assert result.hint == "right value, return it as a float32 tensor of shape (3,)."


def test_the_lessons_wrong_values_do_not_get_a_right_value_hint():
    pays = checks.get("4.4")  # a wrong verdict is no right value in another form
    assert "right value" not in grade_answer(pays, {**pays.solution, "batch x2": "free"}).hint
    float64 = grade_answer(checks.get("0.1"), lambda x: x.double() ** 2 * 3)
    assert "a dict" not in float64.hint


def test_a_float_does_not_get_the_hint_for_an_int_cut_from_a_float():
    ex = _prediction(lambda: 69.55, rtol=1e-3, atol=0.0)
    ex = Exercise(**{**ex.__dict__, "wrong": (wrong(69, "right value, but cut to an int"),)})
    assert grade_answer(ex, 69).hint == "right value, but cut to an int"
    assert grade_answer(ex, 69.0).hint != "right value, but cut to an int"


# --- predictions: other forms pass; a wrong one never shows the answer unless asked ---------------


def _other_form(value):
    """``value`` written as a learner computing from arrays writes it: NumPy scalars and bools,
    tuples for lists (and lists for tuples)."""
    np = pytest.importorskip("numpy")
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value) if value != float(np.float32(value)) else np.float32(value)
    if isinstance(value, list):
        return tuple(_other_form(v) for v in value)
    if isinstance(value, tuple):
        return [_other_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _other_form(v) for k, v in value.items()}
    return value


PREDICTIONS = [e for e in EXERCISES if e.kind == "predict"]


@pytest.mark.parametrize("ex", PREDICTIONS, ids=lambda e: e.id)
def test_a_prediction_in_another_form_passes(ex):
    result = grade_answer(ex, _other_form(ex.solution))
    assert result.status == "passed", result.message


def test_numpy_scalars_and_bools_are_their_python_values():
    np = pytest.importorskip("numpy")
    assert grade_answer(checks.get("0.2"), np.float32(8)).status == "passed"
    assert encode([np.bool_(True), np.int64(3), np.float32(0.5)]) == [True, 3, 0.5]


@pytest.mark.parametrize("ex", PREDICTIONS, ids=lambda e: e.id)
def test_a_wrong_prediction_never_shows_the_answer_unless_revealed(ex):
    expected = checks.expected_outcomes(ex)
    answer_text = show(expected[0])
    for w in ex.wrong:
        result = checks.judge(ex, checks.outcomes_of(ex, w.answer), expected)
        shown = _without_hint(result.message)  # the catalogue's hints are judged by their authors
        assert result.status == "failed" and "expected:" not in shown and answer_text not in shown, shown
        assert f'check("{ex.id}", reveal=True)' in shown
    revealed = checks.judge(ex, checks.outcomes_of(ex, ex.wrong[0].answer), expected, revealed=True)
    assert revealed.status == "revealed" and revealed.revealed and revealed.score == 0
    assert f"  answer:   {answer_text}"[:60] in revealed.message


def test_a_wrong_prediction_says_how_much_is_wrong_and_where():
    ex = _prediction(lambda: {"a": 1.0, "b": 2.0, "c": [1, 2, 3]})
    result = grade_answer(ex, {"a": 1.0, "b": 5.0, "c": [1, 2, 4]})
    assert "wrong:    2 of 3 values are wrong: keys 'b', 'c'" in result.message
    assert "2.0" not in result.message and "expected" not in result.message
    assert "wrong:    missing key 'b'" in grade_answer(ex, {"a": 1.0, "c": [1, 2, 3]}).message
    empty = grade_answer(checks.get("1.3"), {})
    assert (
        "missing key" in empty.message
        and show(checks.expected_outcomes(checks.get("1.3"))[0]) not in empty.message
    )


def test_check_with_reveal_shows_the_answer_and_the_grader_can_find_the_request(capsys):
    check("0.2", 4.0, reveal=True)
    out = capsys.readouterr().out
    assert out.startswith("[0.2 predicted_a_grad] revealed") and "answer:   tensor(8.)" in out
    assert checks.reveals_in('check("0.2", reveal=True)\ncheck("0.1")') == {"0.2"}
    assert checks.reveals_in('check("0.2", reveal=False)') == set()


# --- No notebook imports a prediction's answer -------------------------------------------------

SOLUTIONS = sorted((Path(__file__).resolve().parents[1] / "solutions").glob("[0-9][0-9]_*.ipynb"))


#: A module of a lesson's package of checks (``course.checks.lesson06.ex6_2_...``), not a name in it.
_EXERCISE_MODULE = re.compile(r"^(ex\d+_\d+_\w+|_shared)$")


def _names_taken_from_check_modules(source: str) -> list[tuple[str, str]]:
    """(module, name) for every ``from course.checks.lessonNN[.exN_M_x] import name`` (any
    alias) and every ``module.name`` read off a lesson's check module imported as
    ``course.checks.lessonNN[.exN_M_x]``, from ``course.checks`` or from its package, in a
    cell's code."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell of IPython magics: no Python imports to read
        return []
    taken, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if node.module.startswith("course.checks.lesson") and _EXERCISE_MODULE.match(alias.name):
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif node.module.startswith("course.checks.lesson"):
                    taken.append((node.module, alias.name))
                elif node.module == "course.checks" and alias.name.startswith("lesson"):
                    modules[alias.asname or alias.name] = f"course.checks.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("course.checks.lesson") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            taken.append((modules[node.value.id], node.attr))
    return taken


def _truths_imported(notebook: Path) -> list[str]:
    """'N.M: module.name in cell K' for each prediction truth a notebook's code imports."""
    truths = {id(ex.oracle): ex.id for ex in EXERCISES if ex.kind == "predict"}
    found = []
    for index, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for module, name in _names_taken_from_check_modules(source):
            obj = getattr(importlib.import_module(module), name, None)
            if id(obj) in truths:
                found.append(f"{truths[id(obj)]}: {module}.{name} in cell {index}")
    return found


def test_the_import_finder_sees_every_way_of_naming_a_truth():
    truth = checks.get("6.2").oracle
    module, name = truth.__module__, truth.__name__
    sources = [
        f"from {module} import {name} as m",
        f"import {module} as L\nL.{name}()",
        f"from {module.rsplit('.', 1)[0]} import {module.rsplit('.', 1)[1]} as L\nL.{name}()",
    ]
    for source in sources:
        assert _names_taken_from_check_modules(source) == [(module, name)], source
    assert _names_taken_from_check_modules("from course.checks import check\n%time x") == []


def test_every_solution_notebook_is_searched():
    assert len(SOLUTIONS) >= 10
    lessons = {int(p.name[:2]) for p in SOLUTIONS}
    assert {ex.lesson for ex in EXERCISES if ex.kind == "predict"} <= lessons


@pytest.mark.parametrize("notebook", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_no_notebook_imports_the_truth_of_a_prediction(notebook):
    """A prediction's truth, importable from the notebook, would answer it: the cells after the
    check compute the answer with torch and the course's public API instead."""
    where = f"solutions/{notebook.name}"
    offences = [
        offence(
            "prediction-literal",
            where,
            f"it imports the truth of {found}",
            name=checks.get(found.split(":")[0]).name,
        )
        for found in _truths_imported(notebook)
    ]
    assert offences == [], "\n".join(offences)


# --- Issue 46: honest reveals, two-valued items, domains, the snapshot, time limits -------------


@pytest.mark.parametrize("flag", [1, "yes", [True]])
def test_only_reveal_true_reveals_and_a_truthy_flag_says_so(flag, capsys):
    check("0.2", 4.0, reveal=flag)
    out = capsys.readouterr().out
    assert "revealed" not in out.splitlines()[0] and "tensor(8.)" not in out
    assert "is not True: the answer stays hidden" in out


def test_a_reveal_however_spelled_is_written_to_the_record_the_grader_reads(tmp_path, monkeypatch, capsys):
    record = tmp_path / "reveals"
    monkeypatch.setenv(checks.REVEAL_RECORD, str(record))
    show_it = True
    check("0.2", 4.0, **{"reveal": show_it})
    check("1.4", (1, 1, 1), reveal=show_it)
    check("0.1", reveal=True)  # a function exercise has no answer to reveal
    capsys.readouterr()
    assert checks.reveals_recorded(record) == {"0.2", "1.4"}


def test_two_valued_items_say_how_many_are_wrong_not_which():
    for ex_id in ("1.3", "4.4", "5.4"):
        ex = checks.get(ex_id)
        flipped = ex.wrong[3].answer
        result = grade_answer(ex, flipped)
        wrong_line = next(line for line in result.message.splitlines() if line.startswith("  wrong:"))
        assert "key" not in wrong_line and "position" not in wrong_line, wrong_line
    numbers = grade_answer(checks.get("1.4"), (3, 3, 3))  # numbers: which ones still helps
    assert "positions [2]" in numbers.message


def test_an_item_outside_its_domain_is_named_never_judged_as_a_value():
    result = grade_answer(checks.get("5.4"), [True, "yes", True, False, False, True])
    assert "item [1] is 'yes', not one of True, False" in result.message
    assert "wrong:" not in result.message and result.hint == "write each item as one of True, False."
    pays = grade_answer(checks.get("4.4"), {**checks.get("4.4").solution, "batch x2": "maybe"})
    assert "cannot read your answer" in pays.message  # its parse names the two words
    as_dict = grade_answer(checks.get("5.4"), dict(enumerate(checks.get("5.4").solution)))
    assert as_dict.hint.startswith("right values, give them as a list of 6 bools")
    text = grade_answer(checks.get("0.2"), "4.0")
    assert "not a number" in text.message and "wrong:" not in text.message


def test_the_snapshot_sees_a_module_left_in_eval_mode_a_closure_and_a_graph():
    ex = Exercise(
        id="97.3",
        name="f",
        title="t",
        solution=lambda m: 1,
        cases=[case(torch.nn.Linear(2, 2))],
        wrong=[wrong(lambda m: 2, "h")],
    )

    def leaves_eval(m):
        m.eval()
        return 1

    assert "left in eval mode" in grade_answer(ex, leaves_eval).message
    model = torch.nn.Linear(2, 2)

    def plan():
        return model

    def fills_grad_in_closure(p):
        p().weight.sum().backward()
        return 1

    closure = Exercise(**{**ex.__dict__, "cases": (case(plan),)})
    assert "closure variable model" in grade_answer(closure, fills_grad_in_closure).message
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU()))

    def tags_meta(g):
        next(iter(g.graph.nodes)).meta["seen"] = True
        return 1

    graph = Exercise(**{**ex.__dict__, "cases": (case(gm),)})
    assert "graph was changed" in grade_answer(graph, tags_meta).message


def test_an_answer_that_never_returns_is_stopped_in_the_notebook_check_too(capsys):
    quick = Exercise(**{**checks.get("0.1").__dict__, "timeout": 0.5})
    old = checks.registry.substitute(quick)
    try:

        def spins(x):
            while True:
                pass

        check("0.1", spins)
    finally:
        checks.registry.substitute(old)
    out = capsys.readouterr().out
    assert "too slow" in out and "did not finish within 0.5 s" in out and "loop that never ends" in out


def _one_case_exercise(solution, arg):
    """A made-up exercise: ``solution`` on the one case ``arg``, one known wrong answer."""
    return Exercise("99.5", "f", "f", solution, cases=[case(arg)], wrong=[wrong(lambda *a: None, "no")])


def test_a_check_runs_torch_on_one_thread_and_puts_the_callers_count_back():
    """Answers, oracles and known wrong answers run on one intra-op thread, as in the grader's
    worker (a check's small tensors gain nothing from more: benchmarks/checks.py); the
    learner's own setting is what it was afterwards, even when the answer changed it."""
    seen = []

    def counts_threads(x):
        seen.append(torch.get_num_threads())
        torch.set_num_threads(3)  # an answer that changes the count: put back after the case
        return 2 * x

    ex = _one_case_exercise(lambda x: 2 * x, 3)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert grade_answer(ex, counts_threads).status == "passed"
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen and set(seen) == {1}


def test_every_case_starts_from_torch_manual_seed_0_and_the_callers_generator_is_put_back():
    def draws(n):
        return torch.rand(n)

    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    ex = _one_case_exercise(draws, 4)
    assert grade_answer(ex, lambda n: expected.clone()).status == "passed"
    assert torch.equal(torch.get_rng_state(), state)


def test_the_oracle_runs_before_the_answer_so_the_answer_is_not_timed_for_torchs_first_calls():
    """The first call of many torch functions imports torch._dynamo (1.5 s of CPU, more than
    the 10 s of a case on a loaded machine): the oracle, which has no time limit, pays it."""
    calls = []

    def oracle(x):
        calls.append("oracle")
        return 2 * x

    def answer(x):
        calls.append("answer")
        return 2 * x

    ex = Exercise(**{**_one_case_exercise(oracle, 3).__dict__, "oracle": oracle, "repeatable": False})
    assert grade_answer(ex, answer, timeout=5).status == "passed"
    assert calls == ["oracle", "answer"]
