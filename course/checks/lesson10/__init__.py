"""Checks for lesson 10: the compiler's memory decisions, read from torch's own code.

Each exercise is registered once, in its own module (listed below): each line says what judges
it (torch where torch has the function; otherwise the reference solution, measured with torch's
own tools).

- 10.1 predict what the min-cut partitioner recomputes at ``activation_memory_budget=0``;
- 10.2 choose the saved values an offloading pass should move, from a partitioned forward
  graph and its descriptors (and once from a forward ``torch.compile`` built); judged against
  the reference, and in the lesson against torch's ``choose_offload_sets``;
- 10.3 insert the copies: the graphs looked at (what moved, who reads what, where each copy
  goes, the forward's device peak by liveness) and run, beside torch's
  ``choose_offload_sets``; torch's own ``offload_chosen_sets`` may not do the surgery;
- 10.4 predict why min-cut may not recompute each node: torch's own reasons, read from the
  flow graph ``solve_min_cut`` builds (``ban_recompute_not_in_allowlist=False``);
- 10.5 a 0-1 knapsack with ``dp_knapsack``'s contract: judged against torch's ``dp_knapsack``
  on the runtime kept, the budget, and the caller's lists;
- 10.6 predict where torch's offload pass starts each copy and puts each wait, with
  ``activation_offload_sink_wait`` off and on: torch's own pass on the lesson's partition.

The models the lesson and the checks partition (``OFFLOAD_MODELS``, ``partitioned``) are
lesson content, in course/content/lesson10.py, so the notebook shows exactly what the checks
judge.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson10.ex10_1_predicted_recomputed`: exercise 10.1, predict what the min-cut
  partitioner recomputes;
- :mod:`course.checks.lesson10.ex10_2_choose_offload`: exercise 10.2, choose what an offloading pass
  moves;
- :mod:`course.checks.lesson10.ex10_3_offload_pass`: exercise 10.3, an offload pass that inserts the
  copies;
- :mod:`course.checks.lesson10.ex10_4_predicted_bans`: exercise 10.4, predict why min-cut may not
  recompute each node;
- :mod:`course.checks.lesson10.ex10_5_knapsack`: exercise 10.5, the budget's knapsack, as torch's
  solver;
- :mod:`course.checks.lesson10.ex10_6_predicted_schedule`: exercise 10.6, predict where the offload
  pass schedules copies and waits;
- :mod:`course.checks.lesson10._shared`: what several of those modules share.
"""

from __future__ import annotations

from course.checks.lesson10 import (  # noqa: F401
    ex10_1_predicted_recomputed,
    ex10_2_choose_offload,
    ex10_3_offload_pass,
    ex10_4_predicted_bans,
    ex10_5_knapsack,
    ex10_6_predicted_schedule,
)
