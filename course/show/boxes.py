"""Boxes and arrows: draw a :func:`~course.show.layout.layered_layout` with matplotlib, and
read a drawing back from its artists (crossings, labels that overflow, edges behind boxes).

Example:
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import networkx as nx
    >>> from course.show.layout import layered_layout
    >>> g = nx.DiGraph([("a", "b"), ("a", "c")])
    >>> labels = {n: n for n in g}
    >>> layout = layered_layout(g, sizes={n: label_size(labels[n], 8.0) for n in g})
    >>> fig, ax, font = new_figure_for(layout)
    >>> _ = draw_boxes(g, layout, labels, ax, fills={})
    >>> report = drawn_graph_report(fig)
    >>> report["crossings"], report["overflow"], report["through"], report["edges"]
    (0, [], [], 2)

Every artist carries a gid (``node:<n>``, ``label:<n>``, ``edge:<a>-><b>``), which is how
:func:`drawn_graph_report` and the tests find them.
"""

from __future__ import annotations

__all__ = [
    "label_size",
    "segment_crossings",
    "smooth_route",
    "draw_boxes",
    "new_figure_for",
    "drawn_graph_report",
]

_CHAR_W, _LINE_H, _PAD = 0.62, 1.3, 6.0  # monospace em widths; line height; box padding (pt)


def label_size(label: str, font_size: float) -> tuple[float, float]:
    """Width and height in points of a box that holds ``label`` in a monospace font."""
    lines = label.split("\n")
    return (
        max(len(s) for s in lines) * _CHAR_W * font_size + 2 * _PAD,
        len(lines) * _LINE_H * font_size + 2 * _PAD,
    )


def segment_crossings(polylines: list) -> int:
    """How many pairs of segments, from different polylines, cross at an inner point.

    Segments that only touch (a shared end, as two edges out of one node) do not count.
    """
    segs = [(i, p, q) for i, line in enumerate(polylines) for p, q in zip(line, line[1:])]

    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return 0 if abs(v) < 1e-9 else (1 if v > 0 else -1)

    count = 0
    for k, (i, a, b) in enumerate(segs):
        for j, c, d in segs[k + 1 :]:
            if i == j:
                continue
            o1, o2, o3, o4 = orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
            if o1 * o2 < 0 and o3 * o4 < 0:
                count += 1
    return count


def smooth_route(pts: list, steps: int = 8) -> list:
    """A route's corners rounded off: ``x`` as a monotone cubic of ``y`` through the same
    points (Fritsch-Carlson), sampled ``steps`` times a segment.

    Between two points the curve stays inside their bounding box (no overshoot), so a
    vertical run stays vertical, and a route of one segment stays a straight line. A route
    whose ``y`` does not fall strictly is returned as it is.

    Example:
        >>> smooth_route([(0.0, 0.0), (0.0, -10.0)], steps=2)
        [(0.0, 0.0), (0.0, -5.0), (0.0, -10.0)]
    """
    if len(pts) < 2 or any(q[1] >= p[1] for p, q in zip(pts, pts[1:])):
        return list(pts)
    t = [-p[1] for p in pts]
    x = [p[0] for p in pts]
    h = [b - a for a, b in zip(t, t[1:])]
    d = [(x[k + 1] - x[k]) / h[k] for k in range(len(h))]
    m = [d[0]] + [0.0] * (len(pts) - 2) + [d[-1]]  # slopes dx/dt; straight at both ends
    for k in range(1, len(pts) - 1):
        if d[k - 1] * d[k] > 0:
            w1, w2 = 2 * h[k] + h[k - 1], h[k] + 2 * h[k - 1]
            m[k] = (w1 + w2) / (w1 / d[k - 1] + w2 / d[k])
    out = [pts[0]]
    for k in range(len(h)):
        for j in range(1, steps + 1):
            s = j / steps
            h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
            h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
            xv = h00 * x[k] + h10 * h[k] * m[k] + h01 * x[k + 1] + h11 * h[k] * m[k + 1]
            out.append((xv, -((1 - s) * t[k] + s * t[k + 1])))  # exactly the next point at s = 1
    return out


def draw_boxes(
    g,
    layout: dict,
    labels: dict,
    ax,
    fills: dict,
    font_size: float = 8.0,
    edge_colors: dict | None = None,
    styles: dict | None = None,
    title: str = "",
    edge_styles: dict | None = None,
):
    """Draw ``layout`` on ``ax`` (a fresh axes, 1 data unit = 1 point at ``scale``):
    a rounded box per node sized to its label, edges as polylines with an arrow head
    (``edge_styles``: ``{(a, b): line keywords}`` for edges drawn otherwise than grey).
    An edge cut between two bands (``layout["continued"]``) is two stubs, named "to b"
    under the first band and "from a" over the next.

    Artists carry gids: ``node:<n>`` (box), ``label:<n>`` (text), ``edge:<a>-><b>`` (line),
    so tests can read the drawing back.
    """
    from matplotlib.patches import FancyBboxPatch

    pos, edge_colors, styles = layout["pos"], edge_colors or {}, styles or {}
    continued, cut_names = layout.get("continued", {}), {}
    for (a, b), route in layout["routes"].items():
        style = {"color": "#555555", "linewidth": 0.9, **(edge_styles or {}).get((a, b), {})}
        ha, hb = layout["sizes"][a][1] / 2, layout["sizes"][b][1] / 2
        start = [(route[0][0], route[0][1] - ha)]
        if (a, b) in continued:  # cut between bands: a stub out of a, a stub into b
            tail = continued[a, b]
            _edge(ax, f"{a}->{b}", smooth_route(start + route[1:]), style, arrow=False)
            _edge(ax, f"{a}->{b}", smooth_route(tail[:-1] + [(tail[-1][0], tail[-1][1] + hb)]), style)
            cut_names.setdefault((route[-1], "top", style["color"]), []).append(str(b))
            cut_names.setdefault((tail[0], "bottom", style["color"]), []).append(str(a))
            continue
        _edge(ax, f"{a}->{b}", smooth_route(start + route[1:-1] + [(route[-1][0], route[-1][1] + hb)]), style)
    for n in g:
        (cx, cy), (w, h) = pos[n], layout["sizes"][n]
        box = FancyBboxPatch(
            (cx - w / 2, cy - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=4",
            facecolor=fills.get(n, "#dddddd"),
            edgecolor=edge_colors.get(n, "#333333"),
            linewidth=styles.get(n, {}).get("linewidth", 0.8),
            linestyle=styles.get(n, {}).get("linestyle", "-"),
            zorder=2,
        )
        box.set_gid(f"node:{n}")
        ax.add_patch(box)
        text = ax.text(
            cx,
            cy,
            labels[n],
            ha="center",
            va="center",
            family="monospace",
            fontsize=font_size,
            linespacing=1.15,
            zorder=3,
        )
        text.set_gid(f"label:{n}")
    for (at, va, color), ends in cut_names.items():  # stubs that meet: one name list
        ends = sorted(set(ends), key=ends.index)
        _cut_label(ax, at, ("to " if va == "top" else "from ") + ", ".join(ends), va, font_size, color)
    return ax


def _edge(ax, gid: str, pts: list, style: dict, arrow: bool = True) -> None:
    """One drawn edge: a polyline with gid ``edge:<gid>``, and an arrow head at its end."""
    from matplotlib.patches import FancyArrowPatch

    xs, ys = zip(*pts)
    (line,) = ax.plot(xs, ys, zorder=1, **style)
    line.set_gid(f"edge:{gid}")
    if arrow:
        ax.add_patch(
            FancyArrowPatch(
                pts[-2],
                pts[-1],
                arrowstyle="-|>",
                color=style["color"],
                lw=style["linewidth"],
                shrinkA=0,
                shrinkB=0,
                mutation_scale=8,
                zorder=1,
            )
        )


def _cut_label(ax, at: tuple, text: str, va: str, font_size: float, color: str) -> None:
    """Name the far end of a cut edge at its stub (``va="top"``: under a band)."""
    label = ax.text(
        at[0],
        at[1],
        text,
        ha="center",
        va=va,
        fontsize=font_size * 0.9,
        family="monospace",
        color=color,
        zorder=3,
    )
    label.set_gid(f"cut:{text}")


def new_figure_for(
    layout: dict, font_size: float = 8.0, ax=None, max_inches: float = 18.0, extra_height: float = 0.0
):
    """A figure whose axes map 1 data unit to 1 point, so label-sized boxes fit their text.

    With ``ax`` given (or a layout wider than ``max_inches``), the scale shrinks and the
    returned font size shrinks with it. Returns ``(fig, ax, font_size)``.
    """
    import matplotlib.pyplot as plt

    xs = [
        p[0] + s * w / 2 for n, p in layout["pos"].items() for w in (layout["sizes"][n][0],) for s in (-1, 1)
    ]
    ys = [
        p[1] + s * h / 2 for n, p in layout["pos"].items() for h in (layout["sizes"][n][1],) for s in (-1, 1)
    ]
    for route in layout["routes"].values():
        xs += [p[0] for p in route]
    for route in [
        *layout.get("continued", {}).values(),
        *(layout["routes"][e] for e in layout.get("continued", {})),
    ]:
        ys += [p[1] + 14.0 for p in route] + [p[1] - 14.0 for p in route]  # stubs and their names
    margin = 12.0
    x0, x1 = min(xs) - margin, max(xs) + margin
    y0, y1 = min(ys) - margin, max(ys) + margin
    w_pt, h_pt = x1 - x0, y1 - y0
    if ax is None:
        scale = min(1.0, max_inches * 72 / w_pt, max_inches * 72 / h_pt)
        fig = plt.figure(figsize=(max(5.5, w_pt * scale / 72), h_pt * scale / 72 + extra_height))
        ax = fig.add_axes((0, 0, 1, (h_pt * scale / 72) / (h_pt * scale / 72 + extra_height)))
        if w_pt * scale / 72 < 5.5:  # narrow graph: centre it in the minimum width
            pad = (5.5 * 72 / scale - w_pt) / 2
            x0, x1 = x0 - pad, x1 + pad
    else:
        bbox = ax.get_window_extent()
        dpi = ax.figure.dpi
        scale = min(bbox.width / dpi * 72 / w_pt, bbox.height / dpi * 72 / h_pt)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        half_w, half_h = bbox.width / dpi * 72 / scale / 2, bbox.height / dpi * 72 / scale / 2
        x0, x1, y0, y1 = cx - half_w, cx + half_w, cy - half_h, cy + half_h
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_axis_off()
    return ax.figure, ax, font_size * scale


def drawn_graph_report(fig) -> dict:
    """Read a drawing made by :func:`draw_boxes` back from its artists: the number of edge
    crossings (from the drawn lines), the labels whose text sticks out of their box, and
    the ``(edge, node)`` pairs where an edge runs behind a box it does not touch."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    lines, boxes, texts = [], {}, {}
    for ax in fig.axes:
        for line in ax.lines:
            if (line.get_gid() or "").startswith("edge:"):
                lines.append(list(zip(*line.get_data())))
        for p in ax.patches:
            if (p.get_gid() or "").startswith("node:"):
                boxes[p.get_gid()[5:]] = p.get_window_extent(renderer)
        for t in ax.texts:
            if (t.get_gid() or "").startswith("label:"):
                texts[t.get_gid()[6:]] = t.get_window_extent(renderer)
    overflow = [
        n
        for n, tb in texts.items()
        if not (
            boxes[n].x0 <= tb.x0 and tb.x1 <= boxes[n].x1 and boxes[n].y0 <= tb.y0 and tb.y1 <= boxes[n].y1
        )
    ]
    through = []  # (edge, node): an edge drawn behind a box it does not touch
    for ax in fig.axes:
        for line in ax.lines:
            gid = line.get_gid() or ""
            if gid.startswith("edge:"):
                pts = ax.transData.transform(list(zip(*line.get_data())))
                ends = gid[5:].split("->")
                through += [
                    (gid[5:], n)
                    for n, b in boxes.items()
                    if n not in ends and any(_segment_hits_box(p, q, b) for p, q in zip(pts, pts[1:]))
                ]
    return {
        "crossings": segment_crossings(lines),
        "overflow": overflow,
        "through": through,
        "nodes": len(boxes),
        "edges": len(lines),
    }


def _segment_hits_box(p, q, box, inset: float = 1.0) -> bool:
    """Does the segment ``p``-``q`` enter the box (shrunk by ``inset`` pixels)? Clips the
    segment's parameter range to the box's x and y slabs (Liang-Barsky)."""
    lo, hi = 0.0, 1.0
    for a, b, low, high in (
        (p[0], q[0], box.x0 + inset, box.x1 - inset),
        (p[1], q[1], box.y0 + inset, box.y1 - inset),
    ):
        if a == b:
            if not low < a < high:
                return False
            continue
        t0, t1 = sorted(((low - a) / (b - a), (high - a) / (b - a)))
        lo, hi = max(lo, t0), min(hi, t1)
    return lo < hi
