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


def layered_layout(g) -> dict:
    """networkx's multipartite layout over topological generations (one row per layer)."""
    for layer, nodes in enumerate(nx.topological_generations(g)):
        for n in nodes:
            g.nodes[n]["layer"] = layer
    pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal")
    return {n: (x, -y) for n, (x, y) in pos.items()}  # root at the top


_SIZE = 700  # node marker size (points^2) shared by nodes and edge clipping


def draw_autograd_graph(t, names=None, highlight: Iterable = (), ax=None,
                        max_nodes: int = 300, collapse_above: int = 50):
    """Draw the graph: one row per topological layer, root at the top.

    AccumulateGrad leaves are green, highlighted nodes orange; edges are labelled with
    ``output_nr`` where it is not 0. Above ``collapse_above`` nodes, linear chains are folded
    (:func:`collapse_chains`); above ``max_nodes``, the picture is the :func:`graph_summary`.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: ``t`` has no ``grad_fn``.
    """
    import matplotlib.pyplot as plt

    full = autograd_graph(t, names, highlight)
    g = collapse_chains(full) if full.number_of_nodes() > collapse_above else full
    if ax is None:
        layers = list(nx.topological_generations(g)) if len(g) <= max_nodes else [[0]]
        width = max(len(layer) for layer in layers)
        fig, ax = plt.subplots(figsize=(min(16, max(6, 2.2 * width)), min(16, max(3, 1.3 * len(layers)))))
    fig = ax.figure
    ax.set_axis_off()
    if g.number_of_nodes() > max_nodes:
        ax.text(0.5, 0.5, "too large to draw\n" + graph_summary(full).replace(": ", ":\n"),
                ha="center", va="center", wrap=True)
        return fig
    pos = layered_layout(g)
    colors = ["#f5a742" if g.nodes[n]["highlight"] else
              "#9fd89f" if g.nodes[n].get("shape") is not None else "#cfe2f3" for n in g]
    # Edges that skip a layer bend, so they do not hide behind the nodes in between.
    skip = [e for e in g.edges if g.nodes[e[1]]["layer"] - g.nodes[e[0]]["layer"] > 1]
    nx.draw_networkx_edges(g, pos, edgelist=[e for e in g.edges if e not in skip], ax=ax,
                           arrows=True, node_size=_SIZE, node_shape="s")
    nx.draw_networkx_edges(g, pos, edgelist=skip, ax=ax, arrows=True, node_size=_SIZE,
                           node_shape="s", connectionstyle="arc3,rad=0.4")
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_shape="s", node_size=_SIZE)
    labels = {}
    for n in g:
        d = g.nodes[n]
        saved = sorted(d["saved"], key=lambda s: "=" in s)  # saved tensors before sizes
        extra = [str(d["shape"])] if d.get("shape") is not None else saved[:2]
        labels[n] = "\n".join([d["label"], *extra])
    nx.draw_networkx_labels(g, pos, labels=labels, ax=ax, font_size=7)
    edge_labels = {e: f"output_nr={d['output_nr']}" for e, d in g.edges.items()
                   if d.get("output_nr", 0)}
    for style, edges in (("arc3", [e for e in edge_labels if e not in skip]),
                         ("arc3,rad=0.4", [e for e in edge_labels if e in skip])):
        nx.draw_networkx_edge_labels(g, pos, edge_labels={e: edge_labels[e] for e in edges},
                                     ax=ax, font_size=6, connectionstyle=style)
    ax.margins(x=0.25, y=0.1)  # room for labels wider than their boxes
    if g is not full:
        ax.set_title(f"{len(full)} nodes; chains of 3+ single-in, single-out nodes folded", fontsize=8)
    return fig
