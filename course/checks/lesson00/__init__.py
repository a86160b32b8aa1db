"""Checks for lesson 0, the warm-up: requires_grad, grad_fn, backward() and a leaf's .grad.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/00_warmup.ipynb writes), the oracle (torch), visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson00.ex0_1_cube_sum_grad`: exercise 0.1, the gradient of sum(x**3), by
  autograd;
- :mod:`course.checks.lesson00.ex0_2_predicted_a_grad`: exercise 0.2, predict a.grad after two
  backward passes.
"""

from __future__ import annotations

from course.checks.lesson00 import ex0_1_cube_sum_grad, ex0_2_predicted_a_grad  # noqa: F401
