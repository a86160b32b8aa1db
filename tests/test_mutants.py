"""Does every rule a function exercise's spec states have a case that fails when that rule alone
is broken?

Mutation testing (``course.checks.mutants``): each reference solution is broken one rule at a
time (a comparison flipped, a filter dropped, a boundary off by one, a copy for an in-place
edit, a call left out, ...) and each mutant goes through the exercise's own check. A mutant
that passes is a missing case, unless it means the same as the solution: those are listed in
``EQUIVALENT`` with the reason. Lessons 2 and 9 are mutated by their own authors' tests.
"""

import pytest

from course.checks import all_exercises, passes
from course.checks.mutants import mutants

pytestmark = pytest.mark.slow  # about a minute and a half for every exercise

OWN_LESSONS = (0, 1, 3, 4, 5, 6, 7, 8)

#: (exercise id, mutant description) -> why the mutant means the same as the solution. Lines count
#: from the solution's ``def`` in course/checks/solutions/lessonNN.py (the notebook's region).
EQUIVALENT = {
    ("5.2", "and for or at line 8: kwargs or {} -> kwargs and {}"): (
        "torch always hands __torch_dispatch__ a dict of kwargs, so `kwargs or {}` and "
        "`kwargs and {}` are both that dict (empty or not, func gets the same keywords)"
    ),
    ("5.2", "drop a statement at line 3: super().__init__()"): (
        "TorchDispatchMode.__init__ only records an optional backend key; entering the mode "
        "works without it on torch 2.13"
    ),
    (
        "5.3",
        "swap an operator at line 4: saved.untyped_storage().nbytes() // saved.element_size() -> "
        "saved.untyped_storage().nbytes() * saved.element_size()",
    ): (
        "n only bounds the storage indices that as_strided may read: a larger n gives the same "
        "element indices for both tensors"
    ),
    ("8.2", "flip a comparison at line 10: moved < best[0] -> moved <= best[0]"): (
        "between two choices that move the same bytes, `<=` keeps the later one: the spec asks "
        "for as few bytes as possible, and the check judges the bytes, not which tie is chosen"
    ),
    ("8.2", "off by one at line 7: 1 -> 2"): (
        "range(len(layer_bytes) + 2) adds subsets of n + 1 layers, and there are none"
    ),
    ("8.3", "off by one at line 3: 0 -> 1"): (
        "Offloader(min_bytes=1) skips only tensors of 0 bytes, and an empty tensor moves nothing either way"
    ),
}

FUNCTIONS = [e for lesson in OWN_LESSONS for e in all_exercises(lesson) if e.kind == "function"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a mutant's __del__ may raise
@pytest.mark.parametrize("ex", FUNCTIONS, ids=lambda e: e.id)
def test_every_mutant_of_the_solution_fails_its_check_or_is_listed_as_equivalent(ex):
    survived = [m.description for m in mutants(ex.solution) if passes(ex, m.answer)]
    missing = [d for d in survived if (ex.id, d) not in EQUIVALENT]
    assert missing == [], (
        f"exercise {ex.id}: mutants that pass its check (add a case that fails each): {missing}"
    )
    stale = [d for (i, d) in EQUIVALENT if i == ex.id and d not in survived]
    assert stale == [], f"exercise {ex.id}: listed as equivalent but no longer surviving: {stale}"


def test_a_flipped_boundary_is_caught_by_a_mutant_of_a_toy_exercise():
    from course.checks import Exercise, case, wrong

    def at_least(n, floor):
        return n >= floor

    ex = Exercise(
        id="98.1",
        name="at_least",
        title="t",
        solution=at_least,
        cases=[case(5, 3)],
        wrong=[wrong(lambda n, floor: True, "h")],
    )
    assert [m.description for m in mutants(at_least) if passes(ex, m.answer)] == [
        "flip a comparison at line 2: n >= floor -> n > floor"
    ]  # no case sits on the boundary: the missing case the test exists to find
    boundary = Exercise(**{**ex.__dict__, "cases": (case(5, 3), case(3, 3))})
    assert [m.description for m in mutants(at_least) if passes(boundary, m.answer)] == []
