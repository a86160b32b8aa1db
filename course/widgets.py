"""Frames and steppers, in one import: the path lessons use.

A lesson imports everything it steps through from here::

    from course.widgets import backward_order_frames, backward_order_stepper

    frames = backward_order_frames(loss, names={"w": w})   # plain Python: runs backward once
    backward_order_stepper(frames, drawing=True)            # the widget (last line of a cell)
    print(frames[3])                                        # the same state, for nbval

The code lives in two modules of one concept each: :mod:`course.show.frames` (the frames,
computed without any UI) and :mod:`course.show.widgets` (the ipywidgets views over them).
Their own paths keep working, but this is the one a lesson names.

Example:
    >>> from course.widgets import Frame, Stepper
    >>> Stepper([Frame("a", "first"), Frame("b", "second")])
    Stepper(2 frames, showing 0: 'a')
"""

from course.show.frames import (
    FX_UTILS_QUESTIONS,
    KIND_HELP,
    Frame,
    backward_order_frames,
    event_frames,
    fx_utils_frames,
    mutation_frames,
    offload_frames,
    saved_tensor_frames,
    stage_diff,
    stage_diff_html,
    stage_frames,
)
from course.show.widgets import (
    Stepper,
    backward_order_stepper,
    draw_backward_frame,
    fx_utils_stepper,
    joint_stages_stepper,
    mutation_stepper,
    offload_stepper,
    saved_tensors_stepper,
)

__all__ = [
    # frames (course.show.frames)
    "Frame",
    "FX_UTILS_QUESTIONS",
    "KIND_HELP",
    "backward_order_frames",
    "event_frames",
    "fx_utils_frames",
    "mutation_frames",
    "offload_frames",
    "saved_tensor_frames",
    "stage_diff",
    "stage_diff_html",
    "stage_frames",
    # steppers (course.show.widgets)
    "Stepper",
    "backward_order_stepper",
    "draw_backward_frame",
    "fx_utils_stepper",
    "joint_stages_stepper",
    "mutation_stepper",
    "offload_stepper",
    "saved_tensors_stepper",
]
