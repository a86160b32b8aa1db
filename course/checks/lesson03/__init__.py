"""Checks for lesson 3, saved tensors: what ops save, pack / unpack hooks, memory, compression.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/03_saved_tensors.ipynb writes), the oracle (torch, or course's reference
implementation run on torch's engine), visible and hidden cases, and the known wrong answers
with the hint each deserves. See docs/authoring.md.

The programs the checks run are lesson content, in ``course/content/lesson03.py``, so the
notebook imports and runs exactly what the check judges: ``make_mlp`` / ``mlp_loss`` /
``mlp_grads`` (exercises 3.4 and 3.5), ``packed_bytes`` (the cost of 3.4) and ``MemoryWatch``
(what 3.5's "tensors still in memory" counts). Here stay what judges: ``run_on_disk`` (how a
case of 3.5 runs an answer), the truths of the predictions (``_retain_program`` of 3.1,
``_nested_program`` of 3.2, private: the notebook writes the program out after the check and
never imports what would answer it), the cases, and the known wrong answers, each written out
as a learner would write it, its mistake in its own body.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson03.ex3_1_predicted_calls`: exercise 3.1, predict how often pack and
  unpack run;
- :mod:`course.checks.lesson03.ex3_2_predicted_nesting`: exercise 3.2, predict which hooks run when
  they nest;
- :mod:`course.checks.lesson03.ex3_3_storage_bytes`: exercise 3.3, the bytes a list of saved tensors
  keeps alive;
- :mod:`course.checks.lesson03.ex3_4_compress_hooks`: exercise 3.4, compress saved activations,
  within a byte budget;
- :mod:`course.checks.lesson03.ex3_5_disk_hooks`: exercise 3.5, save to disk, clean up after
  ourselves.
"""

from __future__ import annotations

from course.checks.lesson03 import (  # noqa: F401
    ex3_1_predicted_calls,
    ex3_2_predicted_nesting,
    ex3_3_storage_bytes,
    ex3_4_compress_hooks,
    ex3_5_disk_hooks,
)
