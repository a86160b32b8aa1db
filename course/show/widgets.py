"""Thin ipywidgets steppers over frames computed in plain Python.

Lessons import these from :mod:`course.widgets` (frames and steppers in one import).

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
Figure is shown as a PNG and closed, HTML as HTML, a string is printed, a list item by
item) and ``frame.text`` otherwise.

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
from collections.abc import Callable, Sequence

import ipywidgets as widgets

from course.show.frames import (
    Frame,
    backward_order_frames,
    fx_utils_frames,
    mutation_frames,
    offload_frames,
    saved_tensor_frames,
    stage_diff_html,
    stage_frames,
)
from course.show.fx import draw_joint_graph
from course.show.graph import draw_autograd_graph
from course.show.timeline import draw_timeline

__all__ = [
    "Stepper",
    "fx_utils_stepper",
    "backward_order_stepper",
    "saved_tensors_stepper",
    "mutation_stepper",
    "joint_stages_stepper",
    "offload_stepper",
    "draw_backward_frame",
    "draw_stage_frame",
    "EVENT_COLORS",
    "STEPPER_CSS",
]


#: How a stepper fits a laptop screen (1366x768) under JupyterLab's bars: a title without
#: its margins, the description at text line height rather than a widget row's, and a
#: drawing never taller than the window below the controls (a taller one is scaled down,
#: its proportions kept; tests/test_browser.py measures it).
STEPPER_CSS = (
    ".course-stepper h4.course-stepper-title {margin: 0 0 2px 0}"
    " .course-stepper .course-stepper-description .widget-html-content {line-height: 1.35}"
    " .course-stepper .jp-OutputArea-output img {max-height: calc(100vh - 250px);"
    " width: auto; max-width: 100%}"
)


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Stepper(widgets.VBox):
    """Step through ``frames``: Play, previous, next, a slider, a description and an Output.

    Args:
        frames: a non-empty list of :class:`Frame`.
        draw: ``draw(frame)`` returning a string, a matplotlib Figure, an object with
            ``_repr_html_`` (IPython's ``HTML``) or a list of these, shown in order;
            None prints ``frame.text``.
        title: a heading over the controls.
        interval: milliseconds per frame when playing.
        detail: ``detail(frame)`` returning text shown under the drawing while the
            ``listing`` toggle (labelled ``detail_label``) is on; None: no toggle.

    Raises:
        ValueError: ``frames`` is empty.

    Attributes: ``frames``, ``index`` (the frame shown), ``play``, ``prev_button``,
    ``next_button``, ``slider``, ``description`` (HTML), ``output`` (Output).
    """

    def __init__(
        self,
        frames: Sequence[Frame],
        draw: Callable | None = None,
        title: str = "",
        interval: int = 800,
        detail: Callable | None = None,
        detail_label: str = "full listing",
    ):
        frames = list(frames)
        if not frames:
            raise ValueError("Stepper needs at least one frame; got an empty list")
        self.frames, self.draw, self.detail = frames, draw, detail
        self.listing = widgets.ToggleButton(value=False, description=detail_label, icon="list")
        self.listing.observe(lambda _: self._show(self.slider.value), names="value")
        last = len(frames) - 1
        self.play = widgets.Play(min=0, max=last, interval=interval, description="Play")
        self.prev_button = widgets.Button(
            description="previous", icon="step-backward", layout=widgets.Layout(width="110px")
        )
        self.next_button = widgets.Button(
            description="next", icon="step-forward", layout=widgets.Layout(width="110px")
        )
        self.slider = widgets.IntSlider(min=0, max=last, value=0, description="frame", continuous_update=True)
        self.description = widgets.HTML()
        self.output = widgets.Output(layout=widgets.Layout(min_height="60px"))
        widgets.link((self.play, "value"), (self.slider, "value"))  # kernel-side, testable
        self.prev_button.on_click(lambda _: self._go(self.slider.value - 1))
        self.next_button.on_click(lambda _: self._go(self.slider.value + 1))
        self.slider.observe(lambda change: self._show(change["new"]), names="value")
        # One HTML widget holds the stepper's CSS and its title (ipywidgets' HTML widget
        # sets innerHTML, so a <style> element applies).
        heading = [
            widgets.HTML(
                f"<style>{STEPPER_CSS}</style>"
                + (f'<h4 class="course-stepper-title">{_html_escape(title)}</h4>' if title else "")
            )
        ]
        controls = widgets.HBox(
            [self.play, self.prev_button, self.next_button, self.slider]
            + ([self.listing] if detail is not None else [])
        )
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
        for item in shown if isinstance(shown, (list, tuple)) else [shown]:
            self._append(item)
        if self.detail is not None and self.listing.value:
            self.output.append_stdout(f"--- {self.listing.description} ---\n{self.detail(frame)}\n")

    def _append(self, item) -> None:
        """Show one thing: a string as text, a matplotlib Figure as a PNG (then closed),
        anything else (IPython's ``HTML``, any object with ``_repr_html_``) as IPython
        displays it."""
        if item is None:
            return
        if isinstance(item, str):
            self.output.append_stdout(item + "\n")
        elif hasattr(item, "savefig"):  # before _repr_html_: a Figure has one too
            import matplotlib.pyplot as plt
            from IPython.display import Image

            buf = io.BytesIO()
            item.savefig(buf, format="png", dpi=100, bbox_inches="tight")
            plt.close(item)
            self.output.append_display_data(Image(data=buf.getvalue(), format="png"))
        else:
            self.output.append_display_data(item)


def _frames(source, make, *args, **kwargs) -> list[Frame]:
    if isinstance(source, (list, tuple)) and source and all(isinstance(f, Frame) for f in source):
        return list(source)
    return make(source, *args, **kwargs)


#: Fill of the current node in a backward frame, by event.
EVENT_COLORS = {"pre-hook": "#ffe066", "hook": "#f5a742"}

#: Rows of a backward drawing per band, and the gap between rows (points): a graph of up to
#: eight rows (lesson 01's) stands in two bands that fit under the controls at 1366x768.
BACKWARD_MAX_ROWS, BACKWARD_ROW_GAP = 4, 20.0


def draw_backward_frame(f: Frame):
    """The autograd graph of one :func:`~course.show.frames.backward_order_frames` frame."""
    node, event = f.data["node"], f.data["event"]
    if node is None:
        title = "before backward: nothing has run; boxes show each node's sequence number"
    else:
        title = (
            f"{node}: "
            + ("yellow, about to run (pre-hook)" if event == "pre-hook" else "orange, has just run (hook)")
            + "; grey, dashed: ran before"
        )
    return draw_autograd_graph(
        f.data["graph"],
        highlight=[node] if node else (),
        ran=[n for n in f.data["ran"] if n != node],
        title=title,
        highlight_color=EVENT_COLORS.get(event),
        max_rows=BACKWARD_MAX_ROWS,
        row_gap=BACKWARD_ROW_GAP,
    )


def backward_order_stepper(t, names=None, gradient=None, inputs=None, drawing: bool = False):
    """A Stepper over :func:`~course.show.frames.backward_order_frames` (runs backward).

    ``drawing=True`` draws the graph at each frame: nodes that already ran grey and dashed,
    the current node yellow at its pre-hook (about to run) and orange at its hook (has run),
    each box with its sequence number; else prints the text.
    """
    frames = _frames(t, backward_order_frames, names=names, gradient=gradient, inputs=inputs)
    draw = None
    if drawing:
        draw = draw_backward_frame
    return Stepper(frames, draw=draw, title="backward: which node runs, which hooks fire")


def saved_tensors_stepper(events):
    """A Stepper over the pack / unpack events of a ``course.trace.record()`` list."""
    return Stepper(_frames(events, saved_tensor_frames), title="saved tensors: pack and unpack")


def mutation_stepper(events):
    """A Stepper over pack / unpack / clone events: when a mutation forced a clone."""
    return Stepper(_frames(events, mutation_frames), title="mutating saved tensors")


def _node_names(graph) -> set[str]:
    nodes = graph.graph.nodes if hasattr(graph, "graph") else graph.nodes
    return {n.name for n in nodes}


def draw_stage_frame(f: Frame, previous: Frame | None):
    """A stage's graph with the nodes it added boxed in green, and those it removed named."""
    fig = draw_joint_graph(f.data)
    if previous is None or previous.data is None:
        return fig
    ax = fig.axes[0]
    now, then = _node_names(f.data), _node_names(previous.data)
    for label in ax.texts:  # a node's label starts with its FX name
        words = label.get_text().split()
        if words and words[0] in now - then:
            label.set_bbox(dict(boxstyle="round", facecolor="#b7e4b0", edgecolor="#2a7d2a", linewidth=2))
    removed = sorted(then - now)
    note = f"new nodes boxed green: {len(now - then)}; removed: " + (", ".join(removed[:8]) or "none")
    note += " ..." if len(removed) > 8 else ""
    ax.set_title(f"{ax.get_title()}\n{note}" if ax.get_title() else note, fontsize=9)
    return fig


def joint_stages_stepper(stages, drawing: bool = False):
    """A Stepper over the stages of a staged joint-graph build (``course.aot.joint``).

    Each stage shows what it changed against the stage before (:func:`stage_diff_html`:
    removed lines struck through, added lines green, new descriptors in bold; a notebook
    prints the same as text with :func:`stage_diff`); the "full listing" toggle adds the
    stage's whole text. ``drawing=True`` draws each stage's FX graph above the diff, with
    the nodes the stage added boxed in green and those it removed named.
    """
    from IPython.display import HTML

    frames = _frames(stages, stage_frames)
    before = {id(f): (frames[k - 1] if k else None) for k, f in enumerate(frames)}

    def draw(f):
        diff = HTML(stage_diff_html(before.get(id(f)), f))
        if drawing and f.data is not None:
            return [draw_stage_frame(f, before.get(id(f))), diff]
        return diff

    return Stepper(frames, draw=draw, title="building the joint graph", detail=lambda f: f.text)


def fx_utils_stepper(gm, drawing: bool = True):
    """A Stepper over :func:`~course.show.frames.fx_utils_frames`: nine questions about ``gm``.

    With ``drawing``, each frame draws the joint graph with the nodes of its answer boxed.
    """

    def draw(f):
        fig = draw_joint_graph(gm)
        ax = fig.axes[0]
        for label in ax.texts:  # a node's label starts with its FX name
            words = label.get_text().split()
            if words and words[0] in f.data["names"]:
                label.set_bbox(dict(boxstyle="round", facecolor="yellow", edgecolor="red"))
        ax.set_title(f.title)
        return fig

    return Stepper(
        fx_utils_frames(gm),
        draw=draw if drawing else None,
        title="fx_utils explorer: nine questions about one joint graph",
    )


def offload_stepper(
    intervals,
    memory=None,
    drawing: bool = True,
    compute: str = "compute",
    source: str | None = "predicted (timing model)",
):
    """A Stepper over :func:`~course.show.frames.offload_frames`: a cursor moving in time.

    ``source`` says where the times come from (see :func:`~course.show.timeline.draw_timeline`);
    by default each drawing reads "predicted (timing model), not measured".
    """

    def draw(f):
        return draw_timeline(
            f.data["intervals"], f.data["memory"], cursor=f.data["time"], compute=compute, source=source
        )

    return Stepper(
        _frames(intervals, offload_frames, memory, compute),
        draw=draw if drawing else None,
        title="offloading: compute and copy streams",
    )
