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

from collections import Counter
from collections.abc import Iterable, Mapping

import networkx as nx
import torch

from course.show.boxes import draw_boxes, label_size, new_figure_for
from course.show.layout import layered_layout

__all__ = [
    "NO_GRAD_FN",
    "autograd_graph",
    "graph_text",
    "graph_summary",
    "collapse_chains",
    "draw_autograd_graph",
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
        elif isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
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


def _topological_order(root) -> list:
    """Every Node reachable from ``root``, each after every Node that points to it.

    Found without recursion (graphs can be thousands deep), ordered by Kahn's algorithm with
    ties broken by discovery order, so one graph always gives one order."""
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
    order, ready = [], [root]
    while ready:
        node = ready.pop(0)
        order.append(node)
        for nxt, _ in node.next_functions:
            if nxt is not None:
                indeg[nxt] -= 1
                if indeg[nxt] == 0:
                    ready.append(nxt)
    return order


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
    order = _topological_order(_root(t))
    ids = {node: f"n{i}" for i, node in enumerate(order)}
    by_var = {}
    for name, tensor in (names or {}).items():
        by_var[id(tensor)] = name
        if tensor.grad_fn is not None:
            by_var[id(tensor.grad_fn)] = name
    marks = {
        h if isinstance(h, str) else id(h.grad_fn if isinstance(h, torch.Tensor) else h) for h in highlight
    }
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
        g.nodes[chain[0]].update(
            collapsed=len(chain),
            label=f"{len(chain)} nodes: {first} .. {last}",
            highlight=any(d.get("highlight") for d in data),
        )
        g.add_edge(chain[0], succ, **last_edge)
    return g


#: Fill colours of the autograd drawing.
AUTOGRAD_COLORS = {"node": "#cfe2f3", "leaf": "#9fd89f", "highlight": "#f5a742", "ran": "#d0d0d0"}


def _seq(n: str, d: dict) -> str:
    seq = d.get("seq")
    if seq is None:
        return ""
    return "seq max" if seq >= 2**63 else f"seq {seq}"  # AccumulateGrad: the largest


def _box_label(n: str, d: dict) -> str:
    """A node's box text: its id and label, the leaf's shape or up to two saved values (saved
    tensors before sizes), and the sequence number that orders backward."""
    saved = sorted(d.get("saved", []), key=lambda s: "=" in s)
    extra = [str(d["shape"])] if d.get("shape") is not None else saved[:2]
    seq = _seq(n, d)
    return "\n".join([f"{n} {d['label']}", *extra] + ([seq] if seq else []))


def _fill(d: dict, ran: bool, highlight_color: str | None) -> str:
    """Highlighted, else already ran, else a leaf (AccumulateGrad), else a plain node."""
    if d["highlight"]:
        return highlight_color or AUTOGRAD_COLORS["highlight"]
    if ran:
        return AUTOGRAD_COLORS["ran"]
    return AUTOGRAD_COLORS["leaf"] if d.get("shape") is not None else AUTOGRAD_COLORS["node"]


def _label_output_nrs(g, layout: dict, ax, font: float) -> None:
    """Write ``output_nr=k`` on every edge whose ``k`` is not 0, on the longer of its route's
    last two segments (not a stub)."""
    for (a, b), data in g.edges.items():
        if not data.get("output_nr", 0):
            continue
        route = layout["routes"][(a, b)][-3:]
        (x0, y0), (x1, y1) = max(
            zip(route, route[1:]),
            key=lambda s: (s[1][0] - s[0][0]) ** 2 + (s[1][1] - s[0][1]) ** 2,
        )
        ax.text(
            (x0 + x1) / 2,
            (y0 + y1) / 2,
            f"output_nr={data['output_nr']}",
            fontsize=font * 0.8,
            ha="center",
            va="center",
            bbox=dict(facecolor="white", edgecolor="none", pad=0.5),
        )


def draw_autograd_graph(
    t,
    names=None,
    highlight: Iterable = (),
    ax=None,
    max_nodes: int = 300,
    collapse_above: int = 50,
    ran: Iterable = (),
    title: str | None = None,
    highlight_color: str | None = None,
    max_rows: int | None = None,
    row_gap: float = 40.0,
):
    """Draw the graph in layers (:func:`course.show.layout.layered_layout`), root at the top, each node a box
    sized to its label (the name, the leaf's shape or up to two saved values, and the
    sequence number that orders backward).

    AccumulateGrad leaves are green, highlighted nodes orange (or ``highlight_color``) with
    a thick border, nodes in ``ran`` (ids that already ran) grey with a dashed border; edges carry
    ``output_nr`` where it is not 0.
    ``max_rows``: a deeper graph stands in bands of at most that many rows, side by side
    (:func:`course.show.fold.fold_rows`), so a long chain uses a screen's width;
    ``row_gap``: the space between rows, in points.
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
        ax.text(
            0.5,
            0.5,
            "too large to draw\n" + graph_summary(full).replace(": ", ":\n"),
            ha="center",
            va="center",
            wrap=True,
        )
        return fig
    ran, font = set(ran), 8.0
    labels = {n: _box_label(n, g.nodes[n]) for n in g}
    sizes = {n: label_size(labels[n], font) for n in g}
    layout = layered_layout(g, sizes=sizes, max_rows=max_rows, row_gap=row_gap)
    if title is None:
        title = "autograd graph: gradients flow from the root (top) down to the leaves"
        if g is not full:
            title += f"\n{len(full)} nodes; chains of 3+ single-in, single-out nodes folded"
    lines = title.count("\n") + 1 if title else 0
    fig, ax, font = new_figure_for(layout, font, ax=ax, extra_height=0.1 + 0.2 * lines)
    fills = {n: _fill(g.nodes[n], n in ran, highlight_color) for n in g}
    styles = {n: {"linestyle": "--"} for n in ran}
    styles.update({n: {"linewidth": 2.0} for n in g if g.nodes[n]["highlight"]})
    draw_boxes(g, layout, labels, ax, fills, font_size=font, styles=styles)
    _label_output_nrs(g, layout, ax, font)
    if title:
        fig.suptitle(title, fontsize=9, va="top", y=1 - 0.05 / fig.get_figheight())
    return fig
