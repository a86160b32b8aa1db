"""Frames: the states a lesson steps through, computed in plain Python.

A :class:`Frame` is one state (a title, a description, a plain text form, and optional
data for a drawing). The functions here turn something that happened into a list of
frames; :mod:`course.show.widgets` only shows them. Because a frame's text is plain, a notebook
can ``print(frames[k])`` next to the widget and nbval compares that::

    >>> from course.trace import Event
    >>> frames = event_frames([Event("pack", "MulBackward0", "t0", (2, 3)),
    ...                        Event("unpack", "MulBackward0", "t0", (2, 3))])
    >>> print(frames[2])
    event 2/2: unpack MulBackward0 t0 (2, 3)
    backward asked for a saved tensor; the unpack hook gave it back.
      pack MulBackward0 t0 (2, 3)
    > unpack MulBackward0 t0 (2, 3)
    tensor  shape           pack    unpack  clone
    t0      (2, 3)          1       1       0

Frame 0 is always the state before the first step.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from course.show.graph import autograd_graph, graph_text
from course.show.timeline import as_intervals, memory_at, timeline_text

__all__ = [
    "FX_UTILS_QUESTIONS",
    "Frame",
    "KIND_HELP",
    "fx_utils_frames",
    "backward_order_frames",
    "event_frames",
    "saved_tensor_frames",
    "mutation_frames",
    "stage_frames",
    "stage_diff",
    "stage_diff_html",
    "offload_frames",
]


@dataclass(frozen=True)
class Frame:
    """One state to show. ``str(frame)`` is title, description and text, one per line."""

    title: str
    text: str = ""
    description: str = ""
    data: Any = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return "\n".join(part for part in (self.title, self.description, self.text) if part)


def _check(frames: list[Frame]) -> list[Frame]:
    if len(frames) < 2:  # frame 0 alone means nothing happened
        raise ValueError("nothing to step through: the input produced no events")
    return frames


def _seq_text(seq) -> str:
    return "max" if seq >= 2**63 else str(seq)


def _what_is_new(g, n: str, event: str, first: bool) -> str:
    """What a backward frame adds to the one before: a node about to run, or one that ran."""
    d = g.nodes[n]
    name, seq = f"{n} {d['label']}", _seq_text(d["seq"])
    if event == "pre-hook":
        if first:
            return (
                f"{name} is the root: backward starts here with the seed gradient; "
                "its pre-hook sees that gradient before the node runs."
            )
        return (
            f"{name} runs next: every gradient flowing into it has arrived, and among the "
            f"nodes ready to run it has the highest sequence number (seq {seq}); its "
            "pre-hook sees those gradients before the node runs."
        )
    if d["name"] == "AccumulateGrad":
        leaf = d["label"][len("AccumulateGrad(") : -1] if d["label"] != "AccumulateGrad" else "the leaf"
        return f"{name} has run: it added the gradient into {leaf}.grad; a leaf sends nothing further."
    targets = ", ".join(f"{m}:{nr}" for m, nr in d.get("next", ())) or "no node"
    return f"{name} has run: it computed the gradients for its inputs and sent them to {targets}."


def backward_order_frames(t: torch.Tensor, names=None, gradient=None, inputs=None) -> list[Frame]:
    """Run ``t``'s backward with a pre-hook and a hook on every node; one frame per firing.

    Args:
        t: the tensor to call backward on (it needs a ``grad_fn``).
        names: ``{"w": w}`` labels for leaves, as in :func:`course.show.graph.autograd_graph`.
        gradient, inputs: passed to :func:`torch.autograd.backward` (``grad_tensors``, ``inputs``).

    Returns:
        Frames ``0..2k``: before backward, then ``pre-hook`` / ``hook`` of each node that ran,
        in the order torch fired them. ``frame.data`` holds ``graph`` (the snapshot),
        ``node`` (id), ``event`` and ``ran`` (ids whose hook has fired).

    Raises:
        ValueError: ``t`` has no ``grad_fn``.

    Example:
        >>> w = torch.ones(2, requires_grad=True)
        >>> [f.title for f in backward_order_frames((w * 2).sum(), names={"w": w})][:3]
        ['before backward', 'step 1/6: pre-hook n0 SumBackward0', 'step 2/6: hook n0 SumBackward0']
    """
    g = autograd_graph(t, names)
    live = g.graph.pop("nodes")  # id -> Node; dropped once backward has run
    fired, handles = [], []
    for n, node in live.items():
        handles.append(node.register_prehook(lambda grad_out, n=n: fired.append(("pre-hook", n))))
        handles.append(node.register_hook(lambda gi, go, n=n: fired.append(("hook", n))))
    try:
        torch.autograd.backward(t, grad_tensors=gradient, inputs=inputs)
    finally:
        for h in handles:
            h.remove()
    frames = [
        Frame(
            "before backward",
            graph_text(g),
            "Nothing has run yet; n0 runs first.",
            {"graph": g, "node": None, "event": None, "ran": []},
        )
    ]
    ran: list[str] = []
    for k, (event, n) in enumerate(fired, 1):
        if event == "hook":
            ran.append(n)
        name = g.nodes[n]["label"]
        frames.append(
            Frame(
                f"step {k}/{len(fired)}: {event} {n} {name}",
                graph_text(g, highlight=[n]) + "\nran so far: " + (", ".join(ran) or "none"),
                _what_is_new(g, n, event, first=k == 1),
                {"graph": g, "node": n, "event": event, "ran": list(ran)},
            )
        )
    return _check(frames)


#: What each event kind means, shown as the frame's description.
KIND_HELP = {
    "pack": "forward saved a tensor for backward; the pack hook ran.",
    "unpack": "backward asked for a saved tensor; the unpack hook gave it back.",
    "clone": "the saved tensor was about to be mutated in place, so it was cloned first.",
    "hook": "a hook fired.",
}
_COUNTED = ("pack", "unpack", "clone")


def _event_help(e) -> str:
    """The frame's description: what the event means, naming the clone for a clone event."""
    detail = dict(e.detail)
    if e.kind == "clone" and e.tensor is not None:
        writer = f" through {detail['mutated']}" if detail.get("mutated") else ""
        named = f" ({detail['clone']}, for {detail['handle']})" if detail.get("clone") else ""
        return (
            f"{e.tensor} was about to be written in place{writer} ({e.name}), so it was "
            f'cloned first: from now on "clone of {e.tensor}"{named} stands in for it, '
            f"and backward's unpack of {e.tensor} gets that clone."
        )
    if e.kind == "unpack" and detail.get("handle") and detail.get("saved"):
        read = "the original" if e.tensor == detail["saved"] else f"its clone {e.tensor}"
        return (
            f"backward asked for {detail['saved']}, saved as {detail['handle']}; the "
            f"unpack hook gave back {read}."
        )
    return KIND_HELP.get(e.kind, f"a {e.kind} event.")


def _table(events: Sequence) -> str:
    rows: dict[str, dict] = {}
    for e in events:
        # An unpack may hand back a new tensor (a clone, a copy from CPU): count it against
        # the tensor that was saved, which the event names in its "saved" detail.
        name = dict(e.detail).get("saved") or e.tensor
        if name is None:
            continue
        row = rows.setdefault(name, {"shape": e.shape, **{k: 0 for k in _COUNTED}})
        if e.kind in _COUNTED:
            row[e.kind] += 1
    lines = [f"{'tensor':<8}{'shape':<16}" + "".join(f"{k:<8}" for k in _COUNTED).rstrip()]
    for name, row in rows.items():
        shape = str(tuple(row["shape"])) if row["shape"] is not None else "-"
        lines.append(f"{name:<8}{shape:<16}" + "".join(f"{row[k]:<8}" for k in _COUNTED).rstrip())
    return "\n".join(lines)


def event_frames(events: Iterable, kinds: Iterable[str] | None = None, title: str = "event") -> list[Frame]:
    """One frame per :class:`course.trace.Event` (of ``kinds``, default all).

    Each frame's text is the events so far (``>`` marks the current one) and a table of
    pack / unpack / clone counts per tensor. Raises ValueError if no event is left.
    """
    wanted = None if kinds is None else set(kinds)
    evs = [e for e in events if wanted is None or e.kind in wanted]
    frames = [
        Frame(
            f"{title} 0/{len(evs)}: nothing yet", "", "Before the first event.", {"events": evs, "index": 0}
        )
    ]
    for k, e in enumerate(evs, 1):
        log = [("> " if i == k - 1 else "  ") + str(x) for i, x in enumerate(evs[:k])]
        frames.append(
            Frame(
                f"{title} {k}/{len(evs)}: {e}",
                "\n".join(log + [_table(evs[:k])]),
                _event_help(e),
                {"events": evs, "index": k},
            )
        )
    return _check(frames)


def saved_tensor_frames(events: Iterable) -> list[Frame]:
    """Frames over the pack and unpack events of a recording (see :func:`event_frames`)."""
    return event_frames(events, kinds=("pack", "unpack"), title="saved tensors")


def mutation_frames(events: Iterable) -> list[Frame]:
    """Frames over pack, unpack and clone events: when a mutation forced a clone."""
    return event_frames(events, kinds=("pack", "unpack", "clone"), title="mutation")


def _stage_text(stage) -> str:
    text = getattr(stage, "text", None)
    text = text() if callable(text) else text
    text = text if isinstance(text, str) else str(stage)
    # A stage's text may open with its own "== name ==" header and its explanation; the
    # frame already shows both (title and description), so say them once.
    lines = text.splitlines()
    if lines[:1] == [f"== {stage.name} =="]:
        lines = lines[1:]
    if lines[:1] == [stage.explanation]:
        lines = lines[1:]
    return "\n".join(lines)


def stage_frames(stages: Iterable) -> list[Frame]:
    """One frame per stage of a staged build (e.g. ``course.aot.joint`` stages).

    A stage needs ``.name`` and ``.explanation``; its text is ``.text`` (a string or a
    method) or ``str(stage)``; ``frame.data`` is its ``graph_module`` or ``graph`` if any.
    Raises ValueError on an empty list.
    """
    stages = list(stages)
    if not stages:
        raise ValueError("no stages to step through: pass a non-empty list of stages")
    return [
        Frame(
            f"stage {k}/{len(stages)}: {s.name}",
            _stage_text(s),
            s.explanation,
            getattr(s, "graph_module", None) or getattr(s, "graph", None),
        )
        for k, s in enumerate(stages, 1)
    ]


_DESC = re.compile(r"\b[A-Z]\w*AOT(?:Input|Output)\([^()]*(?:\([^()]*\)[^()]*)*\)")


def _stage_changes(before: Frame | None, after: Frame) -> tuple[str, list[str], list[str]]:
    """The heading, the descriptors new in ``after`` and the changed lines (``+``/``-``
    first) that :func:`stage_diff` and :func:`stage_diff_html` both show."""
    old = before.text.splitlines() if before is not None else []
    new = after.text.splitlines()
    diff = [
        line
        for line in difflib.unified_diff(old, new, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    plus, minus = sum(x[0] == "+" for x in diff), sum(x[0] == "-" for x in diff)
    seen = set(_DESC.findall(before.text)) if before is not None else set()
    fresh = list(dict.fromkeys(d for d in _DESC.findall(after.text) if d not in seen))
    head = (
        "first stage: everything is new"
        if before is None
        else f"changed from the previous stage: +{plus} line{'s' * (plus != 1)}, "
        f"-{minus} line{'s' * (minus != 1)}"
    )
    return head, fresh, diff if before is not None else []


def stage_diff(before: Frame | None, after: Frame) -> str:
    r"""What a stage changed, as text: lines added (``+``) and removed (``-``) against the
    previous stage's text, and the descriptors that appear for the first time.

    Example:
        >>> a, b = Frame("s1", "x = f()\ny = g(x)"), Frame("s2", "x = f()\nz = h(x)  PlainAOTInput(idx=0)")
        >>> print(stage_diff(a, b))
        changed from the previous stage: +1 line, -1 line
        new descriptors: PlainAOTInput(idx=0)
        - y = g(x)
        + z = h(x)  PlainAOTInput(idx=0)
    """
    head, fresh, diff = _stage_changes(before, after)
    lines = [head] + ([f"new descriptors: {', '.join(fresh)}"] if fresh else [])
    if before is not None:
        lines += [f"{x[0]} {x[1:]}" for x in diff] or ["(no change in the text)"]
    return "\n".join(lines)


#: Inline styles of the HTML diff: removed lines struck through in red, added ones green.
DIFF_STYLES = {
    "box": "font-family: monospace; white-space: pre; line-height: 1.35",
    "-": "display: block; color: #a4161a; background: #fdecea; text-decoration: line-through",
    "+": "display: block; color: #1b5e20; background: #e6f4ea; text-decoration: none",
}


def stage_diff_html(before: Frame | None, after: Frame) -> str:
    r""":func:`stage_diff` as HTML for the widget: each removed line a struck-through
    ``<del>``, each added line a green ``<ins>``, the new descriptors in bold, all text
    escaped.

    Example:
        >>> a, b = Frame("s1", "x = f()\ny = g(x)"), Frame("s2", "x = f()\nz = h(x) < 1  PlainAOTInput(idx=0)")
        >>> out = stage_diff_html(a, b)
        >>> out.count("<del "), out.count("<ins "), "<b>PlainAOTInput(idx=0)</b>" in out
        (1, 1, True)
        >>> "h(x) &lt; 1" in out
        True
    """
    head, fresh, diff = _stage_changes(before, after)
    bold = re.compile("|".join(re.escape(d) for d in sorted(fresh, key=len, reverse=True)))

    def marked(text: str) -> str:  # escape the text, with each new descriptor in bold
        out, at = [], 0
        for m in bold.finditer(text) if fresh else ():
            out += [html.escape(text[at : m.start()]), f"<b>{html.escape(m.group())}</b>"]
            at = m.end()
        return "".join(out + [html.escape(text[at:])])

    rows = [f"<div>{html.escape(head)}</div>"]
    if fresh:
        rows.append(
            "<div>new descriptors: " + ", ".join(f"<b>{html.escape(d)}</b>" for d in fresh) + "</div>"
        )
    tags = {"-": "del", "+": "ins"}
    for x in diff:
        tag = tags[x[0]]
        rows.append(f'<{tag} style="{DIFF_STYLES[x[0]]}">{x[0]} {marked(x[1:])}</{tag}>')
    if before is not None and not diff:
        rows.append("<div>(no change in the text)</div>")
    return f'<div class="course-stage-diff" style="{DIFF_STYLES["box"]}">' + "".join(rows) + "</div>"


def offload_frames(intervals, memory=None, compute: str = "compute") -> list[Frame]:
    """One frame per moment something starts or ends on a stream.

    Each frame's text is the timeline with a cursor, what is running, and (with
    ``memory``, a list of ``(time, bytes)``) the memory at that moment.
    Raises ValueError on an empty list of intervals.
    """
    ivs = as_intervals(intervals)
    if not ivs:
        raise ValueError("no intervals to show: pass a list of (stream, start, end, label)")
    frames = []
    times = sorted({p for iv in ivs for p in (iv.start, iv.end)})
    for k, t in enumerate(times, 1):
        running = [f"{iv.stream}: {iv.label}" for iv in ivs if iv.start <= t < iv.end]
        desc = "running: " + ("; ".join(running) if running else "nothing")
        text = timeline_text(ivs, cursor=t, compute=compute)
        if memory:
            text += f"\nmemory at t={t:g}: {memory_at(memory, t):g}"
        frames.append(
            Frame(f"t={t:g} ({k}/{len(times)})", text, desc, {"intervals": ivs, "memory": memory, "time": t})
        )
    return frames


# --- fx_utils: nine questions about one joint graph ------------------------------------------

FX_UTILS_QUESTIONS = {
    "get_param_nodes": "Which placeholders are parameters?",
    "get_named_param_nodes": "Which placeholder holds the parameter with this name?",
    "get_buffer_nodes": "Which placeholders are buffers?",
    "get_named_buffer_nodes": "Which placeholder holds the buffer with this name?",
    "get_all_input_and_grad_nodes": "For every input that can have a gradient, which output is it?",
    "get_param_and_grad_nodes": "For every parameter, which output is its gradient?",
    "get_plain_input_and_grad_nodes": "For every user input, which output is its gradient?",
    "get_all_output_and_tangent_nodes": "For every output that can have a tangent, which input is it?",
    "get_plain_output_and_tangent_nodes": "For every user output, which input is its tangent?",
}


def _answer_lines(answer) -> tuple[list[str], set[str]]:
    """(lines, node names) of one fx_utils answer: a list, {name: node} or {desc: (node, node)}."""
    items = answer.items() if isinstance(answer, dict) else enumerate(answer)
    lines, names = [], set()
    for key, value in items:
        nodes = value if isinstance(value, tuple) else (value,)
        names |= {n.name for n in nodes if n is not None}
        key = f"[{key}]" if isinstance(key, int) else repr(key)
        lines.append(f"  {key:<68} {' -> '.join('None' if n is None else n.name for n in nodes)}")
    return lines, names


def fx_utils_frames(gm) -> list[Frame]:
    """One frame per ``fx_utils`` function: its question and its answer on the joint ``gm``.

    Each answer is computed by course's function and by torch's, and the two must agree (same
    keys, same nodes) or this raises AssertionError. ``frame.data["names"]`` holds the FX
    names of the nodes the answer points at, for a drawing to highlight.
    """
    from torch._functorch._aot_autograd import fx_utils as torch_fx_utils

    from course import fx_utils as course_fx_utils

    frames = []
    for k, (fn_name, question) in enumerate(FX_UTILS_QUESTIONS.items(), 1):
        ours = getattr(course_fx_utils, fn_name)(gm.graph)
        theirs = getattr(torch_fx_utils, fn_name)(gm.graph)
        if _answer_lines(ours) != _answer_lines(theirs):
            raise AssertionError(f"course and torch answer {fn_name} differently on this graph")
        lines, names = _answer_lines(ours)
        frames.append(Frame(f"{k}/9 {fn_name}", "\n".join(lines), question, {"names": names}))
    return frames
