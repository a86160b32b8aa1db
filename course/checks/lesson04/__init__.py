"""Checks for lesson 4, activation offloading: save_on_cpu, a size threshold, the timing model.

Each exercise is registered once, in its own module (listed below): its reference solution (what
solutions/04_offload.ipynb writes), the oracle (torch, or course's ``Offloader`` and timing
model), visible and hidden cases, and the known wrong answers with their hints. See
docs/authoring.md.

There is no GPU in CI, so every check is one the CPU can judge: *whether* a pack hook
copied (the packed tensor has a storage of its own), what dtype and values come back,
which saved tensors a threshold sends to the host and how many bytes, and what the timing
model predicts. Where a copy is *to* matters too, and a CPU cannot show it with real
tensors (every tensor is a host tensor there), so one case per exercise runs the hooks on a
**simulated GPU tensor**: a ``FakeTensorMode`` tensor on ``cuda``, which has a device, a
dtype and a shape but no memory, needs no GPU, and tells a host copy (``device='cpu'``)
from a clone that stays on the device. The programs the checks run (``PROGRAMS``,
``MODELS``, ``PREDICT_NUMBERS``, ``PAY_SETTINGS``) are lesson content, in
``course/content/lesson04.py``, so the notebook imports and runs exactly what the check
judges; a prediction's truth (``_forward_bound``, ``_which_pay``) is private, here.

One module per exercise, imported here in id order (importing one registers its exercise):

- :mod:`course.checks.lesson04.ex4_1_save_on_cpu`: exercise 4.1, save_on_cpu that really copies;
- :mod:`course.checks.lesson04.ex4_2_threshold_hooks`: exercise 4.2, a size-threshold offloader;
- :mod:`course.checks.lesson04.ex4_3_predicted_forward_bound`: exercise 4.3, predict whether forward
  is compute-bound or transfer-bound;
- :mod:`course.checks.lesson04.ex4_4_predicted_pays`: exercise 4.4, predict where offloading costs
  no step time;
- :mod:`course.checks.lesson04._shared`: what several of those modules share.
"""

from __future__ import annotations

from course.checks.lesson04 import (  # noqa: F401
    ex4_1_save_on_cpu,
    ex4_2_threshold_hooks,
    ex4_3_predicted_forward_bound,
    ex4_4_predicted_pays,
)
