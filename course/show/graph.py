"""Text and pictures of an autograd graph, read from a tensor's ``grad_fn``.

A tensor that was computed from tensors with ``requires_grad=True`` carries ``grad_fn``,
the :class:`torch.autograd.graph.Node` that will run first in backward. Following each
node's ``next_functions`` (pairs ``(node, output_nr)``) down to the ``AccumulateGrad``
leaves gives the whole graph. We take a *snapshot* of it as a plain
:class:`networkx.DiGraph` (node names, edges, saved-tensor shapes), so it can be printed
or drawn later, even after backward has freed the saved tensors::

    >>> import torch
    >>> from course.show.graph import graph_text
    >>> w = torch.ones(2, 3, requires_grad=True)
    >>> x = torch.ones(3)
    >>> loss = (w * x).sin().sum()
    >>> print(graph_text(loss, names={"w": w}, highlight=["SinBackward0"]))
    n0 SumBackward0 -> n1:0  saved: self_sym_sizes=(2, 3)
    n1 SinBackward0 * -> n2:0  saved: self (2, 3)
    n2 MulBackward0 -> n3:0  saved: other (3,)
    n3 AccumulateGrad(w) (2, 3)

Each line is one node in topological order (a node comes before every node it sends
gradients to); ``-> n2:0`` is an edge to node ``n2`` with ``output_nr=0``; ``*`` marks a
highlighted node. Node ids ``n0, n1, ...`` follow that order, so nothing printed
depends on memory addresses.

Big graphs: :func:`collapse_chains` folds runs of single-in, single-out nodes into one
box, and anything over ``max_nodes`` is summarised (counts per node type) instead of
drawn, so a 2,000-node graph returns at once.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Iterable, Mapping

import networkx as nx
import torch

__all__ = [
    "NO_GRAD_FN",
    "autograd_graph",
    "graph_text",
    "graph_summary",
    "collapse_chains",
    "draw_autograd_graph",
    "layered_layout",
    "segment_crossings",
    "drawn_graph_report",
]

NO_GRAD_FN = (
    "tensor has no grad_fn: it is a leaf or was made without grad; create it from a tensor "
    "with requires_grad=True, e.g. w = torch.ones(2, requires_grad=True); y = (w * 3).sum()"
)


def _node_name(node) -> str:
    # AccumulateGrad's name() is "torch::autograd::AccumulateGrad"; its type name is clean.
    return type(node).__name__ if "::" in node.name() else node.name()


def _saved(node) -> list[str]:
    """``_saved_*`` attributes as short strings: tensors by shape, other values verbatim."""
    out = []
    for attr in sorted(a for a in dir(node) if a.startswith("_saved_")):
        try:
            value = getattr(node, attr)
        except RuntimeError:  # freed by an earlier backward
            out.append(f"{attr[7:]} (freed)")
            continue
        if isinstance(value, torch.Tensor):
            out.append(f"{attr[7:]} {tuple(value.shape)}")
        elif isinstance(value, (tuple, list)) and value and all(
            isinstance(v, torch.Tensor) for v in value
        ):
            out.append(f"{attr[7:]} [" + ", ".join(str(tuple(v.shape)) for v in value) + "]")
        elif value is not None:
            out.append(f"{attr[7:]}={value}")
    return out


def _root(t) -> object:
    if isinstance(t, torch.Tensor):
        if t.grad_fn is None:
            raise ValueError(NO_GRAD_FN)
        return t.grad_fn
    if t is None:
        raise ValueError(NO_GRAD_FN)
    return t  # already a Node


def autograd_graph(t, names: Mapping[str, torch.Tensor] | None = None, highlight: Iterable = ()):
    """Snapshot the autograd graph behind ``t`` as a :class:`networkx.DiGraph`.

    Args:
        t: a tensor with a ``grad_fn`` (or a Node, or a DiGraph from an earlier call).
        names: ``{"w": w, ...}``: leaves (and intermediate tensors) to label by name.
        highlight: node ids (``"n2"``), node names (``"MulBackward0"``), Node objects
            or named tensors to mark.

    Returns:
        A DiGraph whose nodes ``"n0", "n1", ...`` are in topological order, with attributes
        ``name``, ``label``, ``saved`` (list of str), ``shape`` (AccumulateGrad only),
        ``highlight`` (bool), ``order``, ``next`` (the ``(id, output_nr)`` pairs of
        ``next_functions``, repeats kept); edges carry ``output_nr``.
        ``graph.graph["nodes"]`` maps each id back to the live Node.

    Raises:
        ValueError: ``t`` has no ``grad_fn`` (the message says how to get one).

    Example:
        >>> w = torch.ones(2, requires_grad=True)
        >>> g = autograd_graph((w * 2).sum(), names={"w": w})
        >>> [g.nodes[n]["label"] for n in g]
        ['SumBackward0', 'MulBackward0', 'AccumulateGrad(w)']
    """
    if isinstance(t, nx.DiGraph):  # a snapshot: re-mark by id or name only
        if not highlight:
            return t
        marks, t = set(highlight), t.copy()
        for n, d in t.nodes(data=True):
            d["highlight"] = n in marks or d.get("name") in marks
        return t
    root = _root(t)
    # Discover nodes (iteratively: graphs can be thousands deep) and count incoming edges.
    seen, stack, indeg = {root: None}, [root], Counter()
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            indeg[nxt] += 1
            if nxt not in seen:
                seen[nxt] = None
                stack.append(nxt)
    # Kahn's algorithm; ties broken by discovery order, so the order is deterministic.
    order, ready = [], [root]
    while ready:
        node = ready.pop(0)
        order.append(node)
        for nxt, _ in node.next_functions:
            if nxt is not None:
                indeg[nxt] -= 1
                if indeg[nxt] == 0:
                    ready.append(nxt)
    ids = {node: f"n{i}" for i, node in enumerate(order)}
    by_var = {}
    for name, tensor in (names or {}).items():
        by_var[id(tensor)] = name
        if tensor.grad_fn is not None:
            by_var[id(tensor.grad_fn)] = name
    marks = {h if isinstance(h, str) else id(h.grad_fn if isinstance(h, torch.Tensor) else h)
             for h in highlight}
    marks |= {id(getattr(h, "grad_fn", None)) for h in highlight if isinstance(h, torch.Tensor)}
    g = nx.DiGraph(nodes={v: k for k, v in ids.items()})
    for i, node in enumerate(order):
        name = _node_name(node)
        var = getattr(node, "variable", None)
        label_name = by_var.get(id(var)) if var is not None else by_var.get(id(node))
        g.add_node(
            ids[node],
            order=i,
            name=name,
            label=f"{name}({label_name})" if label_name else name,
            saved=_saved(node),
            shape=tuple(var.shape) if var is not None else None,
            highlight=bool({ids[node], name, id(node)} & marks),
            seq=node._sequence_nr(),  # backward runs ready nodes highest-first
            next=[(ids[m], nr) for m, nr in node.next_functions if m is not None],
        )
    for node in order:
        for nxt, output_nr in node.next_functions:
            if nxt is not None:
                g.add_edge(ids[node], ids[nxt], output_nr=output_nr)
    return g


def graph_summary(g) -> str:
    """One paragraph for a graph too big to print node by node: sizes and node-type counts."""
    g = autograd_graph(g)
    counts = Counter(g.nodes[n].get("name", n) for n in g)
    top = ", ".join(f"{name} x{c}" for name, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:6])
    depth = nx.dag_longest_path_length(g) + 1 if nx.is_directed_acyclic_graph(g) else "?"
    return f"graph of {g.number_of_nodes()} nodes, {g.number_of_edges()} edges, depth {depth}: {top}"


def _line(g, n) -> str:
    d = g.nodes[n]
    parts = [n, d["label"] + (" *" if d["highlight"] else "")]
    if d.get("shape") is not None:
        parts.append(str(d["shape"]))
    nexts = ", ".join(f"{m}:{nr}" for m, nr in d.get("next", ()))
    if nexts:
        parts.append(f"-> {nexts}")
    line = " ".join(parts)
    return line + ("  saved: " + ", ".join(d["saved"]) if d["saved"] else "")


def graph_text(t, names=None, highlight: Iterable = (), max_lines: int = 200) -> str:
    """The graph as text, one line per node in topological order (see the module docstring).

    Args:
        t, names, highlight: as for :func:`autograd_graph` (``t`` may be a snapshot).
        max_lines: above this many nodes, print the first ``max_lines`` then a summary.

    Returns:
        A deterministic multi-line string.

    Raises:
        ValueError: ``t`` has no ``grad_fn``.
    """
    g = autograd_graph(t, names, highlight)
    nodes = sorted(g, key=lambda n: g.nodes[n]["order"])
    lines = [_line(g, n) for n in nodes[:max_lines]]
    if len(nodes) > max_lines:
        lines.append(f"... {len(nodes) - max_lines} more; " + graph_summary(g))
    return "\n".join(lines)


def collapse_chains(g, min_length: int = 3) -> nx.DiGraph:
    """Fold each run of ``min_length``+ nodes with one way in and one way out into one node.

    The folded node keeps the first node's id, gets ``label`` ``"k nodes: A .. B"``,
    ``collapsed=k`` and is highlighted if any member was.

    Example:
        >>> c = collapse_chains(nx.path_graph(6, create_using=nx.DiGraph))
        >>> c.number_of_nodes(), c.nodes[1]["collapsed"]
        (3, 4)
    """
    g = g.copy()
    inner = {n for n in g if g.in_degree(n) == 1 and g.out_degree(n) == 1}
    done = set()
    for n in list(nx.topological_sort(g)):
        if n not in inner or n in done:
            continue
        chain = [n]
        while True:
            (nxt,) = g.successors(chain[-1])
            if nxt not in inner:
                break
            chain.append(nxt)
        done.update(chain)
        if len(chain) < min_length:
            continue
        (succ,) = g.successors(chain[-1])
        last_edge = dict(g.edges[chain[-1], succ])
        data = [dict(g.nodes[c]) for c in chain]
        first, last = (d.get("label", str(c)) for d, c in ((data[0], chain[0]), (data[-1], chain[-1])))
        g.remove_nodes_from(chain[1:])
        g.nodes[chain[0]].update(collapsed=len(chain), label=f"{len(chain)} nodes: {first} .. {last}",
                                 highlight=any(d.get("highlight") for d in data))
        g.add_edge(chain[0], succ, **last_edge)
    return g


# ---- a layered (Sugiyama) layout, sized to the labels -----------------------------------
#
# Three steps, as in every layered drawing: put each node on a row (longest path from the
# top), replace edges that skip rows by chains of invisible "dummy" points, then reorder
# each row to cut crossings. Units are points (1/72 inch), so a box sized from its label's
# characters holds that label at any scale.
#
# The reordering: barycentre sweeps give a first order; "sifting" then moves each node to
# the place in its row with the fewest crossings; and a few seeded random kicks (move a
# few nodes, sift again, keep the result if it is no worse) get out of the dead ends that
# sifting alone stops in. The fewest crossings win; the seed makes the picture the same
# every run.

_CHAR_W, _LINE_H, _PAD = 0.62, 1.3, 6.0  # monospace em widths; line height; box padding (pt)


def label_size(label: str, font_size: float) -> tuple[float, float]:
    """Width and height in points of a box that holds ``label`` in a monospace font."""
    lines = label.split("\n")
    return (max(len(s) for s in lines) * _CHAR_W * font_size + 2 * _PAD,
            len(lines) * _LINE_H * font_size + 2 * _PAD)


def _crossings(order: dict, edges: list) -> int:
    """Crossings between two adjacent rows: pairs of edges whose ends swap order."""
    pts = sorted((order[a], order[b]) for a, b in edges)
    return sum(1 for i, (a1, b1) in enumerate(pts) for a2, b2 in pts[i + 1:]
               if a1 != a2 and b1 != b2 and (a1 < a2) != (b1 < b2))


def _sift_row(row: list, nbrs: list[dict]) -> list:
    """Move each node of ``row`` in turn to its best place, the other nodes kept in order.

    ``nbrs`` holds, per neighbouring row, ``{node: [positions of its neighbours there]}``.
    ``cost[u, v]`` counts the crossings between the edges of ``u`` and ``v`` when ``u`` is
    left of ``v``; sliding a node right past ``m`` changes its crossings by
    ``cost[m, n] - cost[n, m]``.
    """
    cost = {}
    for u in row:
        for v in row:
            if u != v:
                cost[u, v] = sum(1 for side in nbrs for a in side[u] for b in side[v] if a > b)
    row = list(row)
    for n in list(row):
        here = row.index(n)
        rest = row[:here] + row[here + 1:]
        c = sum(cost[n, m] for m in rest)  # n at the far left
        best = (c, here, 0)
        for i, m in enumerate(rest, 1):
            c += cost[m, n] - cost[n, m]
            best = min(best, (c, abs(i - here), i))
        row = rest[:best[2]] + [n] + rest[best[2]:]
    return row


def layered_layout(g, first: list | None = None, last: list | None = None,
                   sizes: dict | None = None, gap: float = 18.0, row_gap: float = 40.0,
                   sweeps: int = 12, restarts: int = 2, kicks: int = 40, sink: bool = False,
                   fixed: tuple[bool, bool] = (True, True)) -> dict:
    """Positions (points, y downwards negative) and routed edges for a DAG ``g``.

    Args:
        first: nodes for the top row, in this order (kept fixed); default: the sources.
        last: nodes for the bottom row, in this order (kept fixed); default: none fixed.
        sizes: ``{node: (width, height)}`` in points (default 40 x 20).
        sweeps: barycentre sweeps (down, up, down, ...) for each starting order.
        restarts: seeded shuffles tried as starting orders, besides the order found and
            its mirror image.
        kicks: rounds of "move 3 random nodes, sift, keep if no worse" on the best order.
        fixed: whether ``first`` and ``last`` keep their order (else the layout may
            reorder them to cut crossings).

    Returns:
        ``{"pos": {node: (x, y)}, "routes": {(a, b): [(x, y), ...]}, "rows": [[node, ...]],
        "crossings": int}``; each route runs from ``a``'s centre to ``b``'s centre, straight
        down through each row it passes and turning only between rows.
    """
    sizes = sizes or {}
    first, last = list(first or []), list(last or [])
    topo = list(nx.topological_sort(g))
    row = {}
    for n in topo:
        preds = [row[p] for p in g.predecessors(n)]
        row[n] = 0 if n in first else (max(preds) + 1 if preds else 0)
    if last:
        bottom = max([row[n] for n in g if n not in last] + [0]) + 1
        for n in last:
            row[n] = bottom
    # Sources that are not pinned to the top sit just above their first successor; with
    # ``sink=True`` every unpinned node does (nodes sink towards the outputs).
    for n in reversed(topo):
        succ = [row[s] for s in g.successors(n)]
        if succ and n not in first and (sink or not list(g.predecessors(n))):
            row[n] = min(succ) - 1
    depth = max(row.values(), default=0) + 1
    rows: list[list] = [[] for _ in range(depth)]
    for n in topo:
        rows[row[n]].append(n)
    if first:
        rows[0] = [n for n in first if n in row] + [n for n in rows[0] if n not in first]
    if last:
        rows[-1] = [n for n in last if n in row] + [n for n in rows[-1] if n not in last]
    # Dummy points for edges that skip rows.
    chains, up, down = {}, {n: [] for n in g}, {n: [] for n in g}
    for a, b in g.edges:
        path = [a] + [("~", a, b, k) for k in range(row[a] + 1, row[b])] + [b]
        for k, d in enumerate(path[1:-1], row[a] + 1):
            rows[k].append(d)
            up[d], down[d] = [], []
        for u, v in zip(path, path[1:]):
            down[u].append(v)
            up[v].append(u)
        chains[(a, b)] = path
    pinned = {0: bool(first) and fixed[0], depth - 1: bool(last) and fixed[1]}
    free = [k for k in range(depth) if not pinned.get(k) and len(rows[k]) > 1]

    def total(rs):
        order = {n: i for r in rs for i, n in enumerate(r)}
        return sum(_crossings(order, [(u, v) for u in rs[k] for v in down[u]])
                   for k in range(len(rs) - 1))

    def sweep(rs, k, nbrs, median):  # sort row k by its neighbours' mean (or median) place
        pos = {n: i for r in rs for i, n in enumerate(r)}

        def key(n):
            ps = sorted(pos[m] for m in nbrs[n])
            if not ps:
                return pos[n]
            if median:
                mid = len(ps) // 2
                return ps[mid] if len(ps) % 2 else (ps[mid - 1] + ps[mid]) / 2
            return sum(ps) / len(ps)
        rs[k] = sorted(rs[k], key=lambda n: (key(n), pos[n]))

    def sift(rs):  # sift every free row, top down then bottom up, until nothing improves
        rs, cross = [list(r) for r in rs], total(rs)
        while True:
            for k in free + free[::-1]:
                nbrs = []
                for side, other in ((up, k - 1), (down, k + 1)):
                    if 0 <= other < depth:
                        at = {m: i for i, m in enumerate(rs[other])}
                        nbrs.append({n: [at[m] for m in side[n]] for n in rs[k]})
                rs[k] = _sift_row(rs[k], nbrs)
            now = total(rs)
            if now >= cross:
                return rs, now
            cross = now

    rng = random.Random(0)
    starts = [[list(r) for r in rows],
              [list(r) if pinned.get(k) else list(reversed(r)) for k, r in enumerate(rows)]]
    for _ in range(restarts):
        starts.append([list(r) if pinned.get(k) else rng.sample(r, len(r)) for k, r in enumerate(rows)])
    best, best_cross = None, None
    for start in starts:
        for median in (False, True):
            rs = [list(r) for r in start]
            here, here_cross = [list(r) for r in rs], total(rs)
            for it in range(sweeps):
                order = range(1, depth) if it % 2 == 0 else range(depth - 2, -1, -1)
                for k in order:
                    if not pinned.get(k):
                        sweep(rs, k, up if it % 2 == 0 else down, median)
                if total(rs) < here_cross:
                    here, here_cross = [list(r) for r in rs], total(rs)
            rs, c = sift(here)
            if best_cross is None or c < best_cross:
                best, best_cross = rs, c
    for _ in range(kicks if free and best_cross else 0):
        rs = [list(r) for r in best]
        for _ in range(3):
            k = rng.choice(free)
            i, j = rng.sample(range(len(rs[k])), 2)
            rs[k].insert(j, rs[k].pop(i))
        rs, c = sift(rs)
        if c <= best_cross:  # equal counts too: lets the search drift across a plateau
            best, best_cross = rs, c
    rows = best
    # x: pack each row, then pull nodes towards their neighbours' mean without overlap.
    width = {n: (sizes.get(n, (40.0, 20.0))[0] if n in g else 4.0) for r in rows for n in r}
    x = {}
    for r in rows:
        left = -(sum(width[n] for n in r) + gap * (len(r) - 1)) / 2
        for n in r:
            x[n] = left + width[n] / 2
            left += width[n] + gap
    for sweep in range(24):  # down, up, down, ...: each row placed as near its wishes as it may
        order = rows if sweep % 2 == 0 else rows[::-1]
        for r in order:
            want = [sum(x[m] for m in up[n] + down[n]) / len(up[n] + down[n]) if up[n] + down[n]
                    else x[n] for n in r]
            for n, p in zip(r, _nearest_in_order(want, [(width[a] + width[b]) / 2 + gap
                                                        for a, b in zip(r, r[1:])])):
                x[n] = p
    heights = [max([sizes.get(n, (40.0, 20.0))[1] for n in r if n in g] + [0.0]) for r in rows]
    y, top = {}, 0.0
    for k, r in enumerate(rows):
        for n in r:
            y[n] = -(top + heights[k] / 2)
        top += heights[k] + row_gap
    pos = {n: (x[n], y[n]) for n in g}
    # No edge may pass behind a box (a crossing could hide there): a box lower than its
    # row gets a vertical stub to the row's edge, and where the straight line through a
    # dummy point would clip a box of its row, the edge runs straight down through the row.
    band = {n: (y[n] + heights[k] / 2, y[n] - heights[k] / 2) for k, r in enumerate(rows) for n in r}
    boxes_in = {k: [(x[n] - width[n] / 2 - 2, x[n] + width[n] / 2 + 2) for n in r if n in g]
                for k, r in enumerate(rows)}
    row_of = {n: k for k, r in enumerate(rows) for n in r}

    def clips(p, d, q):  # would the line p -> d -> q cross a box in d's row?
        top, low = band[d]
        xs = (p[0] + (x[d] - p[0]) * (p[1] - top) / (p[1] - y[d]), x[d],
              x[d] + (q[0] - x[d]) * (y[d] - low) / (y[d] - q[1]))
        return any(lo < max(xs) and min(xs) < hi for lo, hi in boxes_in[row_of[d]])

    def route(path):
        (a, *mid, b), half = path, {n: sizes.get(n, (40.0, 20.0))[1] / 2 for n in (path[0], path[-1])}
        pts = [(x[a], y[a])] + ([(x[a], band[a][1])] if band[a][1] < y[a] - half[a] else [])
        last = (x[a], band[a][1])  # where the drawn line leaves a's row
        for d, nxt in zip(mid, mid[1:] + [b]):
            if clips(last, d, (x[nxt], band[nxt][0])):
                pts += [(x[d], band[d][0]), (x[d], band[d][1])]
            else:
                pts.append((x[d], y[d]))
            last = pts[-1]
        pts += ([(x[b], band[b][0])] if band[b][0] > y[b] + half[b] else []) + [(x[b], y[b])]
        return [p for i, p in enumerate(pts) if i == 0 or p != pts[i - 1]]
    routes = {e: route(path) for e, path in chains.items()}
    return {"pos": pos, "routes": routes, "rows": [[n for n in r if n in g] for r in rows],
            "crossings": best_cross, "sizes": {n: sizes.get(n, (40.0, 20.0)) for n in g}}


def _nearest_in_order(want: list, gaps: list) -> list:
    """Places ``p`` in order, ``p[i+1] - p[i] >= gaps[i]``, as near ``want`` as possible
    (least squares), computed exactly by pooling neighbours that would collide.

    With ``q[i] = p[i] - (gaps[0] + ... + gaps[i-1])`` the rule is ``q`` non-decreasing: the
    best ``q`` is the isotonic fit of the shifted wishes (pool adjacent violators).

    Example:
        >>> _nearest_in_order([0.0, 0.0, 10.0], [2.0, 2.0])
        [-1.0, 1.0, 10.0]
    """
    offsets = [0.0]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    blocks: list[list[float]] = []  # [mean, count] of pooled neighbours
    for w, o in zip(want, offsets):
        blocks.append([w - o, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, c2), (m1, c1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    q = [m for m, c in blocks for _ in range(c)]
    return [v + o for v, o in zip(q, offsets)]


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
        for j, c, d in segs[k + 1:]:
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


def draw_boxes(g, layout: dict, labels: dict, ax, fills: dict, font_size: float = 8.0,
               edge_colors: dict | None = None, styles: dict | None = None, title: str = "",
               edge_styles: dict | None = None):
    """Draw ``layout`` on ``ax`` (a fresh axes, 1 data unit = 1 point at ``scale``):
    a rounded box per node sized to its label, edges as polylines with an arrow head
    (``edge_styles``: ``{(a, b): line keywords}`` for edges drawn otherwise than grey).

    Artists carry gids: ``node:<n>`` (box), ``label:<n>`` (text), ``edge:<a>-><b>`` (line),
    so tests can read the drawing back.
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    pos, edge_colors, styles = layout["pos"], edge_colors or {}, styles or {}
    for (a, b), route in layout["routes"].items():
        ha, hb = layout["sizes"][a][1] / 2, layout["sizes"][b][1] / 2
        pts = smooth_route([(route[0][0], route[0][1] - ha)] + route[1:-1]
                           + [(route[-1][0], route[-1][1] + hb)])
        xs, ys = zip(*pts)
        style = {"color": "#555555", "linewidth": 0.9, **(edge_styles or {}).get((a, b), {})}
        (line,) = ax.plot(xs, ys, zorder=1, **style)
        line.set_gid(f"edge:{a}->{b}")
        ax.add_patch(FancyArrowPatch(pts[-2], pts[-1], arrowstyle="-|>", color=style["color"],
                                     lw=style["linewidth"], shrinkA=0, shrinkB=0, mutation_scale=8, zorder=1))
    for n in g:
        (cx, cy), (w, h) = pos[n], layout["sizes"][n]
        box = FancyBboxPatch((cx - w / 2, cy - h / 2), w, h, boxstyle="round,pad=0,rounding_size=4",
                             facecolor=fills.get(n, "#dddddd"),
                             edgecolor=edge_colors.get(n, "#333333"),
                             linewidth=styles.get(n, {}).get("linewidth", 0.8),
                             linestyle=styles.get(n, {}).get("linestyle", "-"), zorder=2)
        box.set_gid(f"node:{n}")
        ax.add_patch(box)
        text = ax.text(cx, cy, labels[n], ha="center", va="center", family="monospace",
                       fontsize=font_size, linespacing=1.15, zorder=3)
        text.set_gid(f"label:{n}")
    return ax


def new_figure_for(layout: dict, font_size: float = 8.0, ax=None, max_inches: float = 18.0,
                   extra_height: float = 0.0):
    """A figure whose axes map 1 data unit to 1 point, so label-sized boxes fit their text.

    With ``ax`` given (or a layout wider than ``max_inches``), the scale shrinks and the
    returned font size shrinks with it. Returns ``(fig, ax, font_size)``.
    """
    import matplotlib.pyplot as plt

    xs = [p[0] + s * w / 2 for n, p in layout["pos"].items()
          for w in (layout["sizes"][n][0],) for s in (-1, 1)]
    ys = [p[1] + s * h / 2 for n, p in layout["pos"].items()
          for h in (layout["sizes"][n][1],) for s in (-1, 1)]
    for route in layout["routes"].values():
        xs += [p[0] for p in route]
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
    overflow = [n for n, tb in texts.items()
                if not (boxes[n].x0 <= tb.x0 and tb.x1 <= boxes[n].x1
                        and boxes[n].y0 <= tb.y0 and tb.y1 <= boxes[n].y1)]
    through = []  # (edge, node): an edge drawn behind a box it does not touch
    for ax in fig.axes:
        for line in ax.lines:
            gid = line.get_gid() or ""
            if gid.startswith("edge:"):
                pts = ax.transData.transform(list(zip(*line.get_data())))
                ends = gid[5:].split("->")
                through += [(gid[5:], n) for n, b in boxes.items() if n not in ends
                            and any(_segment_hits_box(p, q, b) for p, q in zip(pts, pts[1:]))]
    return {"crossings": segment_crossings(lines), "overflow": overflow, "through": through,
            "nodes": len(boxes), "edges": len(lines)}


def _segment_hits_box(p, q, box, inset: float = 1.0) -> bool:
    """Does the segment ``p``-``q`` enter the box (shrunk by ``inset`` pixels)? Clips the
    segment's parameter range to the box's x and y slabs (Liang-Barsky)."""
    lo, hi = 0.0, 1.0
    for a, b, low, high in ((p[0], q[0], box.x0 + inset, box.x1 - inset),
                            (p[1], q[1], box.y0 + inset, box.y1 - inset)):
        if a == b:
            if not low < a < high:
                return False
            continue
        t0, t1 = sorted(((low - a) / (b - a), (high - a) / (b - a)))
        lo, hi = max(lo, t0), min(hi, t1)
    return lo < hi


#: Fill colours of the autograd drawing.
AUTOGRAD_COLORS = {"node": "#cfe2f3", "leaf": "#9fd89f", "highlight": "#f5a742", "ran": "#d0d0d0"}


def _seq(n: str, d: dict) -> str:
    seq = d.get("seq")
    if seq is None:
        return ""
    return "seq max" if seq >= 2 ** 63 else f"seq {seq}"  # AccumulateGrad: the largest


def draw_autograd_graph(t, names=None, highlight: Iterable = (), ax=None,
                        max_nodes: int = 300, collapse_above: int = 50, ran: Iterable = (),
                        title: str | None = None, highlight_color: str | None = None):
    """Draw the graph in layers (:func:`layered_layout`), root at the top, each node a box
    sized to its label (the name, the leaf's shape or up to two saved values, and the
    sequence number that orders backward).

    AccumulateGrad leaves are green, highlighted nodes orange (or ``highlight_color``) with
    a thick border, nodes in ``ran`` (ids that already ran) grey with a dashed border; edges carry ``output_nr`` where it is not 0.
    Above ``collapse_above`` nodes, linear chains are folded (:func:`collapse_chains`);
    above ``max_nodes``, the picture is the :func:`graph_summary`.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: ``t`` has no ``grad_fn``.
    """
    import matplotlib.pyplot as plt

    full = autograd_graph(t, names, highlight)
    g = collapse_chains(full) if full.number_of_nodes() > collapse_above else full
    if g.number_of_nodes() > max_nodes:
        fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 3))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "too large to draw\n" + graph_summary(full).replace(": ", ":\n"),
                ha="center", va="center", wrap=True)
        return fig
    ran, font = set(ran), 8.0
    labels = {}
    for n in g:
        d = g.nodes[n]
        saved = sorted(d.get("saved", []), key=lambda s: "=" in s)  # saved tensors before sizes
        extra = [str(d["shape"])] if d.get("shape") is not None else saved[:2]
        seq = _seq(n, d)
        labels[n] = "\n".join([f"{n} {d['label']}", *extra] + ([seq] if seq else []))
    sizes = {n: label_size(labels[n], font) for n in g}
    layout = layered_layout(g, sizes=sizes)
    if title is None:
        title = "autograd graph: gradients flow from the root (top) down to the leaves"
        if g is not full:
            title += f"\n{len(full)} nodes; chains of 3+ single-in, single-out nodes folded"
    lines = title.count("\n") + 1 if title else 0
    fig, ax, font = new_figure_for(layout, font, ax=ax, extra_height=0.1 + 0.2 * lines)
    fills = {n: (highlight_color or AUTOGRAD_COLORS["highlight"]) if g.nodes[n]["highlight"] else
             AUTOGRAD_COLORS["ran"] if n in ran else
             AUTOGRAD_COLORS["leaf"] if g.nodes[n].get("shape") is not None else AUTOGRAD_COLORS["node"]
             for n in g}
    styles = {n: {"linestyle": "--"} for n in ran}
    styles.update({n: {"linewidth": 2.0} for n in g if g.nodes[n]["highlight"]})
    draw_boxes(g, layout, labels, ax, fills, font_size=font, styles=styles)
    for (a, b), data in g.edges.items():
        if data.get("output_nr", 0):
            route = layout["routes"][(a, b)][-3:]  # the label sits on the longer of the
            (x0, y0), (x1, y1) = max(zip(route, route[1:]),  # last two segments, not a stub
                                     key=lambda s: (s[1][0] - s[0][0]) ** 2 + (s[1][1] - s[0][1]) ** 2)
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"output_nr={data['output_nr']}",
                    fontsize=font * 0.8, ha="center", va="center",
                    bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
    if title:
        fig.suptitle(title, fontsize=9, va="top", y=1 - 0.05 / fig.get_figheight())
    return fig
