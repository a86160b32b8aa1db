"""What several of lesson 9's exercise checks share."""

from __future__ import annotations

from course.checks.running import remembered_for
from course.checks.solutions.lesson09 import (
    budget_policy,
)


def plans_with_a_backward(fn, args, budget):
    """BAD: a warm-up step before planning, whose backward fills the .grad of the parameters
    fn closes over."""
    fn(*args).backward()  # writes .grad into the model the plan is for
    return budget_policy(fn, args, budget)


# --- Speed: what the checks trace once ---------------------------------------------------------------
#
# A failing check runs every known wrong answer on every case to find the hint. To keep that
# within seconds, the outcome of a known answer of ours, which leaves nothing behind and never
# changes, is computed once per case.

#: ``run``, computed once per case for our own answers to 9.1 and 9.3, but the plan that runs a
#: backward: it leaves .grad behind, which the check must see each time.
once_per_case = remembered_for("9.1", "9.3", besides=(plans_with_a_backward,))
