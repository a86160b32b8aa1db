"""Checks for lesson 11: offloading as a graph pass, on the partitioned graphs of lesson 10.

Each exercise is registered once, in its own module (listed below): each line says what judges
it (torch where torch has the function; otherwise the reference solution, measured with torch's
own tools).

- 11.1 choose the saved values an offloading pass should move, from a partitioned forward
  graph and its descriptors (and once from a forward ``torch.compile`` built); judged against
  the reference, and in the lesson against torch's ``choose_offload_sets``;
- 11.2 insert the copies: the graphs looked at (what moved, who reads what, where each copy
  goes, the forward's device peak by liveness) and run, beside torch's
  ``choose_offload_sets``; torch's own offloading pass (or the helpers it calls) may not do
  the surgery;
- 11.3 predict where torch's offload pass starts each copy and puts each wait, with
  ``activation_offload_sink_wait`` off and on: torch's own pass on the lesson's partition.

The models the lesson and the checks partition (``OFFLOAD_MODELS``, ``partitioned``) are
lesson content, in course/content/lesson10.py (lesson 11 reads lesson 10's partitions), so the
notebook shows exactly what the checks judge.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson11.ex11_1_choose_offload`: exercise 11.1, choose what an offloading pass
  moves;
- :mod:`course.checks.lesson11.ex11_2_offload_pass`: exercise 11.2, an offload pass that inserts the
  copies;
- :mod:`course.checks.lesson11.ex11_3_predicted_schedule`: exercise 11.3, predict where the offload
  pass schedules copies and waits;
- :mod:`course.checks.lesson11._shared`: what several of those modules share;
- :mod:`course.checks.lesson11._surgery`: the two halves of 11.2's surgery that its known
  answers are built from.
"""

from __future__ import annotations

from course.checks.lesson11 import (  # noqa: F401
    ex11_1_choose_offload,
    ex11_2_offload_pass,
    ex11_3_predicted_schedule,
)
