"""Checks for lesson 5, mutating saved tensors: allow_mutation_on_saved_tensors.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/05_mutation.ipynb writes), the oracle, visible and hidden cases, and the known wrong
answers with the hint each deserves. See docs/authoring.md. The pairs of views and the writes
the notebook's tables show (``VIEW_PAIRS``, ``SAVED_X_WRITES``) are lesson content, in
course/content/lesson05.py.

- 5.1 (predict): which saved tensors of a program get cloned. Truth: course's context,
  read after the program ran (``ctx.original`` / ``ctx.cloned``).
- 5.2: a clone-before-mutate TorchDispatchMode for one op, ``mul_``. Oracle: the same clones
  seen one layer up, by a TorchFunctionMode (``Tensor.mul_`` and the ``aten.mul_`` overloads).
  The programs use every op's result (a mode that drops it is seen) and write a copy of the
  watched tensor with equal values (a mode matching by value is seen).
- 5.3: ``same_saved_tensor(saved, mutated)``, the aliasing test torch gets wrong. Oracle:
  write into ``mutated`` and look whether ``saved`` changed; an answer must not write.
- 5.4 (predict): which of six writes (through detach() and .data, a version bump, a clone,
  out= into another tensor, under no_grad) make the context clone a saved x. Truth: each
  write run inside course's context, the clones counted.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson05.ex5_1_predicted_clones`: exercise 5.1, predict which saved tensors
  get cloned;
- :mod:`course.checks.lesson05.ex5_2_clone_before_mul`: exercise 5.2, clone before mul_;
- :mod:`course.checks.lesson05.ex5_3_same_saved_tensor`: exercise 5.3, does a write to `mutated`
  change `saved`?
- :mod:`course.checks.lesson05.ex5_4_predicted_write_clones`: exercise 5.4, which writes clone the
  saved x?
"""

from __future__ import annotations

from course.checks.lesson05 import (  # noqa: F401
    ex5_1_predicted_clones,
    ex5_2_clone_before_mul,
    ex5_3_same_saved_tensor,
    ex5_4_predicted_write_clones,
)
