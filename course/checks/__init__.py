"""Instant checks for the lessons' exercises, and the machinery the grader shares with them.

In a notebook, an exercise is three cells: the spec, the stub the learner fills in, and::

    from course.checks import check
    check("0.1")            # finds the answer by the exercise's name in your notebook
    check("0.1", leaf_grad) # or pass it explicitly

``check`` never raises (so "Run All" goes top to bottom on a fresh copy). It prints one of

- ``passed``: every visible and hidden case agrees with the oracle (and the cost is within
  budget, for a cost-graded exercise);
- ``failed``: the first case that disagrees, yours against expected, and a hint keyed to
  the misconception your answer matches (each exercise lists its known wrong answers);
- ``not attempted``: the stub still raises ``NotImplementedError("exercise N.M")``, or a
  prediction still holds the learner copy's placeholder ``...`` (or is not defined).

What the check's own probes print (the oracle, the known wrong answers it compares yours
with, your answer run on every case) is captured, not shown: the cell shows the verdict only,
at most about 15 lines, with tensors summarized (shape, dtype, first values, max error).

How an answer is judged, in three steps shared by the notebook and the grader:

1. :func:`outcomes_of` runs the answer on every case and records plain-data outcomes;
2. :func:`expected_outcomes` runs the oracle (torch or course's reference) on the same cases;
3. :func:`judge` compares them and builds a :class:`Result`
   (the engine: :mod:`course.checks.judge` and the modules it names; this package only
   re-exports it).

The grader runs step 1 in a separate process against the learner's definitions and steps
2-3 in a process that never runs learner code (see ``course/grading/grade.py``).

Lesson authors register exercises in ``course/checks/lessonNN/`` with :func:`exercise` and
:func:`predict`; ``docs/authoring.md`` walks through a complete example.

The modules:

- :mod:`course.checks.judge`: the engine's verdict, from two lists of outcomes to a printed :class:`Result`;
- :mod:`course.checks.running`: running an answer (or the oracle) on every case into outcomes;
- :mod:`course.checks.hints`: which hint a failing answer gets (the known wrong answer it behaves like first);
- :mod:`course.checks.wording`: a verdict's fields: an outcome shown briefly, clipped, wrapped, indented;
- :mod:`course.checks.reveals`: which predictions' answers a learner asked to see (worth no points);
- :mod:`course.checks.registry`: the :class:`Exercise` record and the registry of every exercise;
- :mod:`course.checks.outcomes`: what running an answer produced, as plain data two processes share;
- :mod:`course.checks.comparison`: whether two outcomes are the same, and where they differ;
- :mod:`course.checks.forms`: the right value in another form, and the form to give it in;
- :mod:`course.checks.wrong_items`: where a prediction is wrong, said without its truth;
- :mod:`course.checks.leftovers`: what an answer leaves behind in the learner's kernel;
- :mod:`course.checks.extra`: an instructor's extra hidden cases for one grading run;
- :mod:`course.checks.descriptor_answers`: descriptor predictions read in any spelling;
- :mod:`course.checks.lessonNN`: one lesson's answer keys, one module per exercise;
- :mod:`course.checks.solutions`: the reference solutions, copied from the solution notebooks;
- :mod:`course.checks.mutants`: mutants of a reference solution, to find the rules no case tests.

Example:
    >>> ex = Exercise(id="9.1", name="double", title="Double it", solution=lambda x: 2 * x,
    ...               cases=[case(3)], wrong=[wrong(lambda x: x + 1, "add, don't multiply?")])
    >>> print(grade_answer(ex, lambda x: x + 1).message)
    [9.1 double] failed: 0/1 cases
      case:     double(3)
      yours:    4
      expected: 6
      hint:     add, don't multiply?
"""

from course.checks.extra import extra_cases
from course.checks.judge import Result, check, grade_answer, judge, partial_score, passes
from course.checks.leftovers import handed
from course.checks.registry import (
    Case,
    Exercise,
    Wrong,
    all_exercises,
    by_name,
    case,
    exercise,
    get,
    lesson_modules,
    load_all,
    predict,
    wrong,
)
from course.checks.reveals import REVEAL_RECORD, reveals_in, reveals_recorded
from course.checks.running import (
    MISSING,
    PLACEHOLDER,
    expected_outcomes,
    forget_cached,
    measure_cost,
    outcomes_of,
)
from course.checks.wording import WIDTH

__all__ = [
    "MISSING",
    "PLACEHOLDER",
    "Case",
    "Exercise",
    "Result",
    "Wrong",
    "all_exercises",
    "by_name",
    "case",
    "check",
    "exercise",
    "expected_outcomes",
    "extra_cases",
    "forget_cached",
    "get",
    "grade_answer",
    "handed",
    "judge",
    "lesson_modules",
    "load_all",
    "measure_cost",
    "outcomes_of",
    "partial_score",
    "passes",
    "predict",
    "REVEAL_RECORD",
    "WIDTH",
    "reveals_in",
    "reveals_recorded",
    "wrong",
]
