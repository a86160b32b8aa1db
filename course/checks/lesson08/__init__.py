"""Checks for lesson 8, the capstone: a training step that fits a device-memory budget.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/08_capstone.ipynb writes), an oracle that is not the solution, visible and hidden
cases, and the known wrong answers with their hints. See docs/authoring.md. The oracles:

- 8.1: course's ``Offloader``, whose counters were checked against torch's hooks in lesson 4;
- 8.2: torch's own 0/1 knapsack (``dp_knapsack``, which the min-cut partitioner can use);
- 8.3: the offload done by hand with torch's saved-tensor hooks, no ``Offloader``;
- 8.4 (a prediction): torch's min-cut partitioner on each block, then every subset.

The model the lesson and the checks share (``Block``, ``make_model``) and the lesson's numbers
(``LESSON_LAYER_BYTES``, ``LESSON_PARAM_BYTES``, ``LESSON_BUDGET``) are lesson content, in
course/content/lesson08.py, so the notebook measures exactly what the checks judge; the
other models of the hidden cases (``MODELS``) are here. Everything runs on the
CPU: "device memory" is what a GPU would hold; here we count bytes, we do not time copies.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson08.ex8_1_saved_bytes_per_layer`: exercise 8.1, saved bytes per block;
- :mod:`course.checks.lesson08.ex8_2_choose_offload`: exercise 8.2, choose what to offload under a
  budget;
- :mod:`course.checks.lesson08.ex8_3_offloaded_step`: exercise 8.3, apply the choice;
- :mod:`course.checks.lesson08.ex8_4_predicted_plan`: exercise 8.4, recompute, then move: the plan
  under Inductor's partitioner;
- :mod:`course.checks.lesson08._shared`: what several of those modules share.
"""

from __future__ import annotations

from course.checks.lesson08 import (  # noqa: F401
    ex8_1_saved_bytes_per_layer,
    ex8_2_choose_offload,
    ex8_3_offloaded_step,
    ex8_4_predicted_plan,
)

# solutions/09_memory_policies.ipynb imports 8.2's solution from here
from course.checks.solutions.lesson08 import choose_offload  # noqa: F401
