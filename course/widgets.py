"""Public face of :mod:`course.show.widgets` (kept at this path: lessons import it).

Steppers: ipywidgets views over lists of frames computed in plain Python.
"""

from course.show.widgets import (
    Frame,
    Stepper,
    fx_utils_stepper,
    backward_order_stepper,
    saved_tensors_stepper,
    mutation_stepper,
    joint_stages_stepper,
    offload_stepper,
    draw_backward_frame,
    backward_order_frames,
    fx_utils_frames,
    saved_tensor_frames,
    mutation_frames,
    stage_frames,
    stage_diff,
    stage_diff_html,
    offload_frames,
)

__all__ = [
    "Frame",
    "Stepper",
    "fx_utils_stepper",
    "backward_order_stepper",
    "saved_tensors_stepper",
    "mutation_stepper",
    "joint_stages_stepper",
    "offload_stepper",
    "draw_backward_frame",
    "backward_order_frames",
    "fx_utils_frames",
    "saved_tensor_frames",
    "mutation_frames",
    "stage_frames",
    "stage_diff",
    "stage_diff_html",
    "offload_frames",
]
