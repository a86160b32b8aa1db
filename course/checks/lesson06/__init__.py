"""Checks for lesson 6, building the joint graph: a joint by hand, its placeholders, its mutations.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/06_joint_graph.ipynb writes), the oracle, visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md.

- 6.1 (``make_joint``) is graded the way AOTAutograd uses a joint function: the check traces
  ``make_joint(fn)`` with ``make_fx`` on example primals that require grad, runs the traced
  graph on *new* inputs and tangents, and compares with eager autograd on those inputs. It
  also looks at the example primals after tracing: they arrive with a ``.grad`` from "an
  earlier step", and a joint function must leave it exactly as it was (not accumulated into,
  not wiped).
- 6.2 and 6.3 are predictions; the truth is torch's ``aot_export_joint_with_descriptors``.
  6.3 reads descriptors in any spelling (either quotes, spaces, course's or torch's objects)
  through ``course.checks.descriptor_answers.descriptor_reprs`` before comparing.
- 6.4 (``apply_mutations``) plays torch's runtime epilogue: given a joint graph (exported
  inside the check, by torch's exporter or by ``course.aot.joint.export_joint``, so torch's
  descriptor classes and course's) and its forward outputs, copy each mutation into the
  caller's tensor and return the user's outputs. Oracle: the module run eagerly, its side
  effects read off the very tensors the caller holds. Two hidden graphs carry an effect token.

The programs of 6.2 and 6.3, which the notebook prints and exports too, are lesson content
(course/content/lesson06.py); the modules of 6.4's hidden cases are here.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson06.ex6_1_make_joint`: exercise 6.1, a joint function by hand;
- :mod:`course.checks.lesson06.ex6_2_predicted_tangent_mask`: exercise 6.2, predict which outputs
  get a tangent;
- :mod:`course.checks.lesson06.ex6_3_predicted_placeholders`: exercise 6.3, predict the
  placeholders;
- :mod:`course.checks.lesson06.ex6_4_apply_mutations`: exercise 6.4, play the runtime: copy the
  mutations back.
"""

from __future__ import annotations

from course.checks.lesson06 import (  # noqa: F401
    ex6_1_make_joint,
    ex6_2_predicted_tangent_mask,
    ex6_3_predicted_placeholders,
    ex6_4_apply_mutations,
)
