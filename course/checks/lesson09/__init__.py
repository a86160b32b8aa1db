"""Checks for lesson 9: memory policies, recompute or offload, with saved-tensor hooks.

Each exercise is registered once, in its own module (listed below): each line says what judges
it (torch where torch has the function; otherwise the reference solution, measured with torch's
own tools).

- 9.1 a pair of saved-tensor hooks that recomputes instead of storing: judged against
  ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` with early stop off
  (gradients, how many times each aten op runs in forward and in backward, how many
  forward results the hooks keep alive, and how many tensors made in backward outlive three
  steps and a ``gc.collect()``);
- 9.2 predict what the recomputation reruns (torch's checkpoint, early stop on);
- 9.3 a selective-checkpointing policy that stores at most a budget of bytes and leaves the
  fewest FLOPs to rerun: run through torch's ``create_selective_checkpoint_contexts``, its
  stored bytes (the cost) and the FLOPs backward reruns (torch's ``FlopCounterMode``)
  judged against the reference's;

The model, the programs and the measurements the lesson and the checks share (``make_model``,
``PROGRAMS``, ``run_policy``, ``BUDGET``) are lesson
content, in course/content/lesson09.py, so the notebook shows exactly what the checks judge.
Two of 9.3's known wrong answers, ``save_every_product`` and ``in_forward_order``, are also
rows of the notebook's table of policies; they stay here, with the answers.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson09.ex9_1_recompute_hooks`: exercise 9.1, recompute instead of store, as
  a pair of hooks;
- :mod:`course.checks.lesson09.ex9_2_predicted_reruns`: exercise 9.2, predict what the recomputation
  reruns;
- :mod:`course.checks.lesson09.ex9_3_budget_policy`: exercise 9.3, a policy that meets a memory
  budget with the least recompute;
- :mod:`course.checks.lesson09._shared`: what several of those modules share.
"""

from __future__ import annotations

from course.checks.lesson09 import ex9_1_recompute_hooks, ex9_2_predicted_reruns, ex9_3_budget_policy  # noqa: F401
