"""What lesson 05 runs: the pairs of views and the writes its tables go through.

Lesson 05 (solutions/05_mutation.ipynb) asks when a write into memory that backward saved
must be copied first. Two of its tables run programs kept here, so the notebook prints what
the checks of exercises 5.3 and 5.4 judge:

- ``VIEW_PAIRS``: pairs ``(saved, mutated)`` of expressions over ``b = arange(12.).reshape(3, 4)``
  (and ``c``, a copy of ``b``): does a write through the second change the first?
- ``SAVED_X_WRITES``: six ways to write into, or near, a tensor ``x`` that ``w * x`` saved.

>>> len(VIEW_PAIRS), VIEW_PAIRS[1]
(15, ('b', 'b[1]'))
>>> SAVED_X_WRITES[1]
'increment_version(x)'

Which answers are right for them lives with the exercises, in course/checks/lesson05/.
"""

from __future__ import annotations

__all__ = ["SAVED_X_WRITES", "VIEW_PAIRS"]

#: The pairs of exercise 5.3: (saved, mutated) as expressions over b = arange(12).reshape(3, 4)
#: and c, a second tensor with the same values.
VIEW_PAIRS = [
    ("b", "b"),
    ("b", "b[1]"),
    ("b[1]", "b"),
    ("b[0]", "b[1]"),
    ("b", "c"),
    ("b[:, 0]", "b[:, 1]"),
    ("b[1]", "b[1:]"),
    ("b.t()", "b"),
    ("b[:, 2:]", "b[1]"),
    ("b[::2]", "b[1]"),
    ("b[0, :2]", "b[0, 2:]"),
    ("b.view(12)[5:7]", "b[1]"),
    ("b.t()[1]", "b[:, 1]"),
    ("b[:, 1]", "b[2]"),
    ("b[1:, 1:]", "b[0]"),
]

#: The writes of exercise 5.4. Each runs inside the course's context after
#: ``out = (w * x).sum()``, which saves ``x`` (a plain tensor, x = arange(6.).reshape(2, 3));
#: ``y`` is another tensor of the same shape, saved by nothing.
SAVED_X_WRITES = [
    "x.detach()[0].mul_(3)",
    "increment_version(x)",
    "x.data.zero_()",
    "x.clone().mul_(3)",
    "torch.mul(x, 2, out=y)",
    "with torch.no_grad(): x.mul_(2)",
]
