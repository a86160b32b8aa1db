"""Thin ipywidgets steppers over frames computed in plain Python.

Every stepper is two things: a pure function that returns a list of
:class:`~course.show.frames.Frame` (tested without any UI), and a :class:`Stepper` that
shows one frame at a time with Play, previous / next buttons and a slider. Next to the
widget a notebook prints the same state, which is what nbval compares::

    frames = backward_order_frames(loss, names={"w": w})   # runs backward once
    backward_order_stepper(frames)   # the widget (last expression of a cell)
    print(frames[3])                 # the same state as plain text

Each ``*_stepper`` takes either the source (a tensor, events, stages, intervals) or a
list of frames already computed from it.

The Output area shows ``draw(frame)`` when a ``draw`` function is given (a matplotlib
Figure is shown as a PNG and closed; a string is printed) and ``frame.text`` otherwise.

Example:
    >>> from course.show.frames import Frame
    >>> s = Stepper([Frame("a", "first"), Frame("b", "second")], title="demo")
    >>> s.next_button.click(); s.index, s.description.value
    (1, '<b>b</b>')
    >>> s
    Stepper(2 frames, showing 1: 'b')
    >>> s.output.outputs[0]["text"]
    'second\\n'
"""

from __future__ import annotations

import io
from typing import Callable, Sequence

import ipywidgets as widgets

from course.show.fx import draw_joint_graph
from course.show.frames import (
    Frame,
    backward_order_frames,
    mutation_frames,
    offload_frames,
    saved_tensor_frames,
    stage_frames,
)
from course.show.graph import draw_autograd_graph
from course.show.timeline import draw_timeline

__all__ = ["Frame", "Stepper", "backward_order_stepper", "saved_tensors_stepper",
           "mutation_stepper", "joint_stages_stepper", "offload_stepper",
           # the pure frame functions behind them, re-exported for notebooks
           "backward_order_frames", "saved_tensor_frames", "mutation_frames",
           "stage_frames", "offload_frames"]


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Stepper(widgets.VBox):
    """Step through ``frames``: Play, previous, next, a slider, a description and an Output.

    Args:
        frames: a non-empty list of :class:`Frame`.
        draw: ``draw(frame)`` returning a matplotlib Figure or a string; None prints
            ``frame.text``.
        title: a heading over the controls.
        interval: milliseconds per frame when playing.

    Raises:
        ValueError: ``frames`` is empty.

    Attributes: ``frames``, ``index`` (the frame shown), ``play``, ``prev_button``,
    ``next_button``, ``slider``, ``description`` (HTML), ``output`` (Output).
    """

    def __init__(self, frames: Sequence[Frame], draw: Callable | None = None,
                 title: str = "", interval: int = 800):
        frames = list(frames)
        if not frames:
            raise ValueError("Stepper needs at least one frame; got an empty list")
        self.frames, self.draw = frames, draw
        last = len(frames) - 1
        self.play = widgets.Play(min=0, max=last, interval=interval, description="Play")
        self.prev_button = widgets.Button(description="previous", icon="step-backward",
                                          layout=widgets.Layout(width="110px"))
        self.next_button = widgets.Button(description="next", icon="step-forward",
                                          layout=widgets.Layout(width="110px"))
        self.slider = widgets.IntSlider(min=0, max=last, value=0, description="frame",
                                        continuous_update=True)
        self.description = widgets.HTML()
        self.output = widgets.Output(layout=widgets.Layout(min_height="60px"))
        widgets.link((self.play, "value"), (self.slider, "value"))  # kernel-side, testable
        self.prev_button.on_click(lambda _: self._go(self.slider.value - 1))
        self.next_button.on_click(lambda _: self._go(self.slider.value + 1))
        self.slider.observe(lambda change: self._show(change["new"]), names="value")
        heading = [widgets.HTML(f"<h4>{_html_escape(title)}</h4>")] if title else []
        controls = widgets.HBox([self.play, self.prev_button, self.next_button, self.slider])
        super().__init__(heading + [controls, self.description, self.output])
        self.add_class("course-stepper")  # CSS hooks for the browser test and for styling
        self.description.add_class("course-stepper-description")
        self._show(0)

    def __repr__(self) -> str:
        # The text/plain twin of the widget in saved notebooks: stable, so nbval can compare.
        n = len(self.frames)
        return f"Stepper({n} frame{'s' * (n != 1)}, showing {self.index}: {self.frames[self.index].title!r})"

    @property
    def index(self) -> int:
        return self.slider.value

    def _go(self, k: int) -> None:
        self.slider.value = max(0, min(len(self.frames) - 1, k))  # observe() redraws

    def _show(self, k: int) -> None:
        frame = self.frames[k]
        desc = f"<b>{_html_escape(frame.title)}</b>"
        if frame.description:
            desc += f"<br>{_html_escape(frame.description)}"
        self.description.value = desc
        self.output.outputs = ()  # clear_output() would print escapes outside a kernel
        shown = self.draw(frame) if self.draw is not None else frame.text
        if isinstance(shown, str):
            self.output.append_stdout(shown + "\n")
        elif shown is not None:  # a matplotlib Figure: show it as a PNG, then free it
            import matplotlib.pyplot as plt
            from IPython.display import Image

            buf = io.BytesIO()
            shown.savefig(buf, format="png", dpi=80, bbox_inches="tight")
            plt.close(shown)
            self.output.append_display_data(Image(data=buf.getvalue(), format="png"))


def _frames(source, make, *args, **kwargs) -> list[Frame]:
    if isinstance(source, (list, tuple)) and source and all(isinstance(f, Frame) for f in source):
        return list(source)
    return make(source, *args, **kwargs)


def backward_order_stepper(t, names=None, gradient=None, inputs=None, drawing: bool = False):
    """A Stepper over :func:`~course.show.frames.backward_order_frames` (runs backward).

    ``drawing=True`` draws the graph with the current node highlighted; else prints text.
    """
    frames = _frames(t, backward_order_frames, names=names, gradient=gradient, inputs=inputs)
    draw = None
    if drawing:
        def draw(f):
            return draw_autograd_graph(f.data["graph"], highlight=[f.data["node"]] if f.data["node"] else ())
    return Stepper(frames, draw=draw, title="backward: which node runs, which hooks fire")


def saved_tensors_stepper(events):
    """A Stepper over the pack / unpack events of a ``course.trace.record()`` list."""
    return Stepper(_frames(events, saved_tensor_frames), title="saved tensors: pack and unpack")


def mutation_stepper(events):
    """A Stepper over pack / unpack / clone events: when a mutation forced a clone."""
    return Stepper(_frames(events, mutation_frames), title="mutating saved tensors")


def joint_stages_stepper(stages, drawing: bool = False):
    """A Stepper over the stages of a staged joint-graph build (``course.aot.joint``).

    ``drawing=True`` draws each stage's FX graph (stages without one print their text).
    """
    def draw(f):
        return draw_joint_graph(f.data) if f.data is not None else f.text
    return Stepper(_frames(stages, stage_frames), draw=draw if drawing else None,
                   title="building the joint graph")


def offload_stepper(intervals, memory=None, drawing: bool = True, compute: str = "compute"):
    """A Stepper over :func:`~course.show.frames.offload_frames`: a cursor moving in time."""
    def draw(f):
        return draw_timeline(f.data["intervals"], f.data["memory"], cursor=f.data["time"],
                             compute=compute)
    return Stepper(_frames(intervals, offload_frames, memory, compute), draw=draw if drawing else None,
                   title="offloading: compute and copy streams")
