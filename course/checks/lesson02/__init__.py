"""Checks for lesson 2, hooks: tensor hooks, node hooks, multi-grad hooks, whole-graph logging.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/02_hooks.ipynb writes), the oracle (torch), visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md.

The programs the checks run are lesson content, in ``course/content/lesson02.py``, so the
notebook imports and runs exactly what the check judges: ``clip_forward`` (exercise 2.2),
``MULTI_PROGRAMS`` (exercise 2.3), ``ANY_ACTIONS`` (exercise 2.4) and ``norm_model`` with
``NORM_ACTIONS`` (exercise 2.5). A prediction's truth
(``_hook_order``; ``_which_fire`` and its runner ``_multi_grad_firings``) is private: the
notebook runs the program itself, after the check, and never imports what would answer it.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson02.ex2_1_predicted_order`: exercise 2.1, predict the order in which
  hooks fire;
- :mod:`course.checks.lesson02.ex2_2_clip_grad_hook`: exercise 2.2, clip a gradient by its norm,
  with a tensor hook;
- :mod:`course.checks.lesson02.ex2_3_predicted_firings`: exercise 2.3, predict what a mode="all"
  multi-grad hook receives;
- :mod:`course.checks.lesson02.ex2_4_any_grad_hook`: exercise 2.4, mode "any" from plain tensor
  hooks;
- :mod:`course.checks.lesson02.ex2_5_grad_norm_monitor`: exercise 2.5, per-parameter norms in hooks,
  one report in a queued callback;
- :mod:`course.checks.lesson02._shared`: what several of those modules share.
"""

from __future__ import annotations

from course.checks.lesson02 import (  # noqa: F401
    ex2_1_predicted_order,
    ex2_2_clip_grad_hook,
    ex2_3_predicted_firings,
    ex2_4_any_grad_hook,
    ex2_5_grad_norm_monitor,
)
