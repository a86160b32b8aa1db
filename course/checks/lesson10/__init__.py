"""Checks for lesson 10: the compiler's memory decisions, read from torch's own code.

Each exercise is registered once, in its own module (listed below): each line says what judges
it (torch where torch has the function; otherwise the reference solution, measured with torch's
own tools).

- 10.1 predict what the min-cut partitioner recomputes at ``activation_memory_budget=0``;
- 10.2 predict why min-cut may not recompute each node: torch's own reasons, read from the
  flow graph ``solve_min_cut`` builds (``ban_recompute_not_in_allowlist=False``);
- 10.3 a 0-1 knapsack with ``dp_knapsack``'s contract: judged against torch's ``dp_knapsack``
  on the runtime kept, the budget, and the caller's lists.

The models the lesson and the checks partition (``partitioned``, ``normed_block``) are lesson
content, in course/content/lesson10.py, so the notebook shows exactly what the checks judge.
Lesson 11's offload exercises, once 10.2, 10.3 and 10.6, are in course/checks/lesson11/.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson10.ex10_1_predicted_recomputed`: exercise 10.1, predict what the min-cut
  partitioner recomputes;
- :mod:`course.checks.lesson10.ex10_2_predicted_bans`: exercise 10.2, predict why min-cut may not
  recompute each node;
- :mod:`course.checks.lesson10.ex10_3_knapsack`: exercise 10.3, the budget's knapsack, as torch's
  solver.
"""

from __future__ import annotations

from course.checks.lesson10 import (  # noqa: F401
    ex10_1_predicted_recomputed,
    ex10_2_predicted_bans,
    ex10_3_knapsack,
)
