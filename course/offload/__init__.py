"""Activation offloading: the offloader, its timing model and its benchmark harness.

Three modules, one concept each:

- :mod:`course.offload.offloader`: :class:`Offloader`, saved-tensor hooks that move
  activations off the device (copy mode, stream mode with prefetch, a size threshold);
- :mod:`course.offload.model`: a timing model that predicts a step's time from per-layer
  compute times, saved bytes and link bandwidth;
- :mod:`course.offload.bench`: a harness that runs one model under several strategies and
  reports step time, peak memory and bytes moved.

``from course.offload import Offloader, benchmark, predict_step`` is the public entry.
All three are the course's own code, written on torch's public saved-tensor hooks.
"""

from course.offload import bench, model, offloader
from course.offload.bench import (
    PUBLISHED,
    RESULTS_FORMAT,
    STRATEGIES,
    BenchmarkResult,
    StrategyResult,
    benchmark,
    copy_bandwidth,
    forward_seconds,
    hook_seconds,
    load_results,
    plot,
    predict_rows,
    results_table,
    schedule_of,
    stored_results,
)
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
from course.offload.offloader import HostBufferPool, Offloader, OffloadStats

__all__ = [*offloader.__all__, *model.__all__, *bench.__all__]
