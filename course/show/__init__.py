"""Deterministic text and matplotlib drawings for the lessons, in one import.

Three kinds of picture, each with a plain-text twin a notebook can ``print`` (nbval
compares the text; the drawing is for people):

================================  =====================================  ==================
what                              text                                   drawing
================================  =====================================  ==================
an autograd graph (``grad_fn``)   :func:`graph_text`                     :func:`draw_autograd_graph`
a joint FX graph + descriptors    :func:`joint_graph_text`               :func:`draw_joint_graph`
streams and memory over time      :func:`timeline_text`, `memory_text`   :func:`draw_timeline`
================================  =====================================  ==================

The code lives in :mod:`course.show.graph`, :mod:`course.show.fx` and
:mod:`course.show.timeline`; the layered layout they share in :mod:`course.show.layout`
(drawn by :mod:`course.show.boxes`); :func:`show_source` (the course's source beside
torch's, :mod:`course.show.source`); deep drawings folded into side-by-side bands by
:mod:`course.show.fold`, and joint graphs too large to draw whole made small by
:mod:`course.show.shrink`. Frames (:mod:`course.show.frames`, the states a lesson steps through)
and their ipywidgets steppers (:mod:`course.show.widgets`) are imported from
:mod:`course.widgets`. This module only re-exports. Nothing printed holds a memory
address: autograd nodes are named ``n0, n1, ...`` in topological order and FX nodes by
their FX names.

Example:
    >>> import torch
    >>> from course import show
    >>> w = torch.ones(2, requires_grad=True)
    >>> print(show.graph_text((w * 2).sum(), names={"w": w}))
    n0 SumBackward0 -> n1:0  saved: self_sym_sizes=(2,)
    n1 MulBackward0 -> n2:0  saved: other ()
    n2 AccumulateGrad(w) (2,)
    >>> show.graph_text(torch.ones(2))
    Traceback (most recent call last):
    ...
    ValueError: tensor has no grad_fn: it is a leaf or was made without grad; ...
"""

from course.show import fx, graph, shrink, timeline  # noqa: E402  (the submodules, for their __all__)
from course.show.boxes import drawn_graph_report, segment_crossings
from course.show.fx import (
    CUT_STYLE,
    KIND_COLORS,
    PAIR_COLORS,
    as_fx_graph,
    descriptor_kind,
    draw_joint_graph,
    joint_graph_text,
    joint_nx_graph,
    joint_pairs,
    partition_cut,
)
from course.show.graph import (
    NO_GRAD_FN,
    autograd_graph,
    collapse_chains,
    draw_autograd_graph,
    graph_summary,
    graph_text,
)
from course.show.layout import layered_layout
from course.show.shrink import group_ends, summarise_joint
from course.show.source import SourcePair, show_source
from course.show.timeline import (
    Interval,
    draw_timeline,
    hidden_copy_time,
    memory_at,
    memory_text,
    timeline_text,
)

__all__ = [
    *graph.__all__,
    *fx.__all__,
    *shrink.__all__,
    *timeline.__all__,
    "layered_layout",
    "segment_crossings",
    "drawn_graph_report",
    "SourcePair",
    "show_source",
]
