"""Activation offloading: the offloader, its timing model and its benchmark harness.

Six modules, one concept each:

- :mod:`course.offload.offloader`: :class:`Offloader`, saved-tensor hooks that move
  activations off the device (copy mode, stream mode with prefetch, a size threshold);
- :mod:`course.offload.host_buffers`: the host buffers it copies into, reused by size;
- :mod:`course.offload.model`: a timing model that predicts a step's time from per-layer
  compute times, saved bytes and link bandwidth;
- :mod:`course.offload.bench`: a harness that runs one model under several strategies and
  reports step time, peak memory and bytes moved;
- :mod:`course.offload.predictions`: what the timing model predicts for a run of it;
- :mod:`course.offload.results`: the stored GPU runs of that harness, read and checked.

``from course.offload import Offloader, benchmark, predict_step`` is the public entry.
All three are the course's own code, written on torch's public saved-tensor hooks.
"""

from course.offload import bench, host_buffers, model, offloader, predictions, results
from course.offload.bench import (
    STRATEGIES,
    BenchmarkResult,
    StrategyResult,
    benchmark,
    hook_seconds,
    plot,
)
from course.offload.host_buffers import HostBufferPool
from course.offload.model import (
    MB,
    StepPrediction,
    StepSchedule,
    lower_bound,
    overlapped_time,
    pipelined_time,
    predict_step,
    step_schedule,
    synchronous_time,
    transfer_times,
)
from course.offload.offloader import Offloader, OffloadStats
from course.offload.predictions import PUBLISHED, copy_bandwidth, forward_seconds, predict_rows, schedule_of
from course.offload.results import RESULTS_FORMAT, load_results, results_table, stored_results

__all__ = [
    *offloader.__all__,
    *host_buffers.__all__,
    *model.__all__,
    *bench.__all__,
    *predictions.__all__,
    *results.__all__,
]
