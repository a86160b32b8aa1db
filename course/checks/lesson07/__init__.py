"""Checks for lesson 7, descriptors and fx_utils: reading and rewriting a joint graph.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/07_descriptors.ipynb writes), the oracle, visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md.

The pass exercises (7.3, 7.4) are graded on joint graphs torch exports inside the check:
``MODULES`` names the small modules (most of them never appear in the notebook), and a case
is a module's name. Each module is exported once per process with torch's
``aot_export_joint_with_descriptors``; every call of an answer gets a fresh copy of the graph.

Exercise 7.2 predicts how torch nests descriptors in four small programs (``NESTING_PROGRAMS``,
lesson content like 7.1's ``PredictMe`` and 7.5's ``Logged``: course/content/lesson07.py):
the truth exports each with torch and finds the named value's descriptor by its parts, in any
order, so only the nesting is judged. Exercise 7.3's oracle runs no graph: eager autograd on
the module, the parameters whose ``.grad`` stays None.

The lesson's descriptor zoo (the smallest program for each descriptor class) lives in
:mod:`course.content.zoo`; exercise 7.5 predicts the outputs of one more such program.
The descriptor predictions (7.1, 7.5) are read in any spelling
(:mod:`course.checks.descriptor_answers`).

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson07.ex7_1_predicted_placeholders`: exercise 7.1, predict the
  placeholders;
- :mod:`course.checks.lesson07.ex7_2_predicted_nestings`: exercise 7.2, predict how torch nests
  descriptors;
- :mod:`course.checks.lesson07.ex7_3_params_without_grad`: exercise 7.3, parameters that get no
  gradient;
- :mod:`course.checks.lesson07.ex7_4_scale_param_grads`: exercise 7.4, scale every parameter
  gradient;
- :mod:`course.checks.lesson07.ex7_5_predicted_outputs`: exercise 7.5, predict the outputs of a zoo
  program;
- :mod:`course.checks.lesson07._shared`: what several of those modules share.
"""

from __future__ import annotations

from course.checks.lesson07 import (  # noqa: F401
    ex7_1_predicted_placeholders,
    ex7_2_predicted_nestings,
    ex7_3_params_without_grad,
    ex7_4_scale_param_grads,
    ex7_5_predicted_outputs,
)
