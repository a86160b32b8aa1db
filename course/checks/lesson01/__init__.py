"""Checks for lesson 1, the autograd graph: Nodes, AccumulateGrad, gradient edges, versions.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/01_autograd_graph.ipynb writes), the oracle (torch), visible and hidden cases, and the
known wrong answers with the hint each deserves. See docs/authoring.md.

The graphs of exercise 1.1 and the programs of exercise 1.3 (``GRAPHS``,
``INPLACE_PROGRAMS``) are lesson content, in ``course/content/lesson01.py``: the notebook
imports them from there and runs exactly what the check judges. A prediction's truth
(``_which_break`` and its runner ``_breaks_backward``, ``_version_program``) is private: no
notebook imports what would answer it.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson01.ex1_1_bfs_names`: exercise 1.1, walk the graph breadth first;
- :mod:`course.checks.lesson01.ex1_2_pre_relu_grad`: exercise 1.2, the gradient at an edge, after an
  in-place op;
- :mod:`course.checks.lesson01.ex1_3_predicted_breaks`: exercise 1.3, predict which in-place op
  breaks backward;
- :mod:`course.checks.lesson01.ex1_4_predicted_versions`: exercise 1.4, predict the version
  counters.
"""

from __future__ import annotations

from course.checks.lesson01 import (  # noqa: F401
    ex1_1_bfs_names,
    ex1_2_pre_relu_grad,
    ex1_3_predicted_breaks,
    ex1_4_predicted_versions,
)
