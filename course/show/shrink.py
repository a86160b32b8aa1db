"""Joint graphs too large to draw node by node, made small enough: the ops merged into a
``forward`` and a ``backward`` box (:func:`summarise_joint`), and long rows of inputs or outputs
merged into one box per descriptor kind (:func:`group_ends`). :func:`course.show.fx.draw_joint_graph`
uses them when folding chains is not enough.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx

__all__ = ["group_ends", "summarise_joint"]


def summarise_joint(d: nx.DiGraph) -> nx.DiGraph:
    """Merge the call_function nodes of a joint graph into two boxes, ``forward`` and
    ``backward`` (everything downstream of a tangent), labelled with op counts; inputs,
    outputs and the pairs stay as they are.

    Example:
        >>> g = nx.DiGraph([("x", "sin"), ("sin", "output[0]"), ("tangents_1", "mul"),
        ...                 ("sin", "mul"), ("mul", "output[1]")])
        >>> for n, op in [("x", "placeholder"), ("tangents_1", "placeholder"),
        ...               ("output[0]", "output"), ("output[1]", "output")]:
        ...     g.nodes[n].update(op=op, label=n)
        >>> for n in ("sin", "mul"):
        ...     g.nodes[n].update(op="call_function", target=n)
        >>> s = summarise_joint(g)
        >>> s.nodes["forward"]["label"], sorted(s.successors("forward"))
        ('forward\\n1 ops: sin x1', ['backward', 'output[0]'])
    """
    tangents = [n for n in d if d.nodes[n]["op"] == "placeholder" and n.startswith("tangents")]
    backward = set().union(*(nx.descendants(d, t) for t in tangents)) if tangents else set()
    group = {
        n: ("backward" if n in backward else "forward") for n in d if d.nodes[n]["op"] == "call_function"
    }
    s = nx.DiGraph(pairs=d.graph.get("pairs", []))
    for n in d:
        if n not in group:
            s.add_node(n, **d.nodes[n])
    for name in ("forward", "backward"):
        members = [n for n, g in group.items() if g == name]
        if members:
            ops = Counter(d.nodes[n].get("target", n) for n in members)
            top = ", ".join(f"{op} x{c}" for op, c in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
            s.add_node(
                name,
                label=f"{name}\n{len(members)} ops: {top}",
                op="call_function",
                kind="none",
                highlight=False,
                collapsed=len(members),
            )
    for a, b in d.edges:
        a, b = group.get(a, a), group.get(b, b)
        if a != b:
            s.add_edge(a, b)
    return s


def group_ends(d: nx.DiGraph, most: int = 8) -> nx.DiGraph:
    """Where a graph has more than ``most`` placeholders (or outputs), merge them into one box
    per descriptor kind, labelled with the count and the first and last member, placed at
    its first member's ``index``.

    Example:
        >>> g = nx.DiGraph([(f"p{i}", "f") for i in range(3)] + [("f", "output[0]")])
        >>> for i in range(3):
        ...     g.nodes[f"p{i}"].update(op="placeholder", kind="ParamAOTInput", index=i, label=f"p{i}")
        >>> g.nodes["output[0]"].update(op="output", kind="PlainAOTOutput", index=0)
        >>> g.nodes["f"].update(op="call_function")
        >>> s = group_ends(g, most=2)
        >>> s.nodes["in:ParamAOTInput"]["label"], sorted(s.edges)
        ('ParamAOTInput x3\\np0 … p2', [('f', 'output[0]'), ('in:ParamAOTInput', 'f')])
    """
    s = d.copy()
    for op, tag in (("placeholder", "in"), ("output", "out")):
        ends = sorted((n for n in d if d.nodes[n]["op"] == op), key=lambda n: d.nodes[n]["index"])
        if len(ends) <= most:
            continue
        groups: dict[str, list] = {}
        for n in ends:
            groups.setdefault(d.nodes[n]["kind"], []).append(n)
        for kind, members in groups.items():
            name = f"{tag}:{kind}"
            label = f"{kind if kind != 'none' else 'no descriptor'} x{len(members)}\n{members[0]}" + (
                f" … {members[-1]}" if len(members) > 1 else ""
            )
            s.add_node(
                name,
                label=label,
                op=op,
                kind=kind,
                highlight=False,
                index=d.nodes[members[0]]["index"],
                grouped=len(members),
            )
            for m in members:
                s.add_edges_from((p, name) for p in s.predecessors(m))
                s.add_edges_from((name, q) for q in s.successors(m))
                s.remove_node(m)
    return s
