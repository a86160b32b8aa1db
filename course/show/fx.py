"""Text and pictures of a joint FX graph: inputs and outputs by descriptor, and their pairs.

A joint graph (``aot_export_joint_with_descriptors``) takes parameters, plain inputs and
tangents as placeholders and returns forward outputs and gradients. Each placeholder and
each output carries a descriptor in ``node.meta["desc"]``. The ``get_*`` functions of
``fx_utils`` pair them up: a parameter with its gradient (``get_param_and_grad_nodes``), a
forward output with its tangent (``get_plain_output_and_tangent_nodes``). We print and
draw those pairs::

    ParamAOTInput(target='0.weight'): primals_1 -> grad t_8
    PlainAOTOutput(idx=0): addmm_1 <- tangent tangents_1

We pair them with ``course.aot.fx_utils``, which accepts graphs holding torch's
descriptors or the course's.

Example:
    >>> import contextlib, torch
    >>> from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    >>> from course.show.fx import joint_graph_text
    >>> with contextlib.ExitStack() as stack:
    ...     joint = aot_export_joint_with_descriptors(stack, torch.nn.Linear(3, 2), (torch.ones(4, 3),))
    ...     print(joint_graph_text(joint.graph_module))  # doctest: +ELLIPSIS
    placeholder primals_1  ParamAOTInput(target='weight')
    ...
    ParamAOTInput(target='weight'): primals_1 -> grad ...
    ...
"""

from __future__ import annotations

import networkx as nx

from course.aot import fx_utils
from course.show.boxes import draw_boxes, label_size, new_figure_for
from course.show.graph import collapse_chains
from course.show.layout import layered_layout
from course.show.shrink import group_ends, summarise_joint

__all__ = [
    "KIND_COLORS",
    "descriptor_kind",
    "joint_pairs",
    "joint_graph_text",
    "joint_nx_graph",
    "draw_joint_graph",
    "as_fx_graph",
    "PAIR_COLORS",
    "partition_cut",
    "CUT_STYLE",
]


#: Fill colour per descriptor class name; anything else is grey.
KIND_COLORS = {
    "ParamAOTInput": "#9fd89f",
    "BufferAOTInput": "#c9e7a5",
    "PlainAOTInput": "#cfe2f3",
    "TangentAOTInput": "#f5c6a5",
    "PlainAOTOutput": "#a7c7f0",
    "GradAOTOutput": "#f5a742",
}


def descriptor_kind(desc) -> str:
    """The descriptor's class name (``"ParamAOTInput"``), or ``"none"`` for no descriptor."""
    return "none" if desc is None else type(desc).__name__


def _graph(g):
    return getattr(g, "graph", g)  # GraphModule -> Graph; Graph stays


def joint_pairs(g) -> list[tuple[str, object, object, object]]:
    """The pairs a joint graph links: ``("grad", desc, param_node, grad_node)`` for each
    parameter and plain input, ``("tangent", desc, output_node, tangent_node)`` for each
    plain output. The second node is None where there is no partner. A partitioned half
    of a joint graph, whose grads or tangents lack their partners, gives no pairs of that
    kind rather than an error."""
    graph = _graph(g)
    has_desc = any("desc" in n.meta for n in graph.nodes if n.op in ("placeholder", "output"))
    if not has_desc:
        return []
    pairs = []
    for how, get in (
        ("grad", fx_utils.get_param_and_grad_nodes),
        ("grad", fx_utils.get_plain_input_and_grad_nodes),
        ("tangent", fx_utils.get_plain_output_and_tangent_nodes),
    ):
        try:
            pairs += [(how, d, n, m) for d, (n, m) in get(graph).items()]
        except (KeyError, LookupError, AssertionError, ValueError):
            # Half a joint graph (a partitioned forward or backward) has grads without
            # their params, or tangents without their outputs: nothing to pair there.
            continue
    return pairs


def joint_graph_text(g) -> str:
    """Placeholders and outputs with their descriptors, then the linked pairs.

    Args:
        g: an ``fx.GraphModule`` or ``fx.Graph`` (descriptors optional).

    Returns:
        One line per placeholder and output, a blank line, one line per pair.
    """
    graph, lines = _graph(g), []
    for n in graph.nodes:
        if n.op == "placeholder":
            lines.append(f"placeholder {n.name}  {n.meta.get('desc')!r}")
        elif n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else (n.args[0],)
            descs = n.meta.get("desc") or [None] * len(outs)
            for i, (o, d) in enumerate(zip(outs, descs)):
                lines.append(f"output[{i}] {getattr(o, 'name', o)}  {d!r}")
    calls = sum(n.op == "call_function" for n in graph.nodes)
    lines.append(f"({calls} call_function nodes)")
    pair_lines = []
    for how, desc, a, b in joint_pairs(g):
        arrow = "-> grad" if how == "grad" else "<- tangent"
        pair_lines.append(f"{desc!r}: {a.name} {arrow} {b.name if b is not None else None}")
    return "\n".join(lines + ([""] + pair_lines if pair_lines else []))


def joint_nx_graph(g) -> nx.DiGraph:
    """The FX graph as a DiGraph; the output node becomes one ``output[i]`` node per value.

    Node attributes: ``label``, ``op``, ``kind`` (descriptor kind), ``highlight``, and for
    placeholders and outputs their ``index`` (placeholder order, output order); the
    ``pairs`` graph attribute lists ``(a, b, how)`` node-name pairs from :func:`joint_pairs`.
    """
    graph, d = _graph(g), nx.DiGraph()
    for n in graph.nodes:
        if n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else (n.args[0],)
            descs = n.meta.get("desc") or [None] * len(outs)
            for i, (o, desc) in enumerate(zip(outs, descs)):
                # A None output is a gradient slot with no gradient (its input needs none).
                label = f"output[{i}]" + ("" if hasattr(o, "name") else f"\n{o!r}")
                d.add_node(
                    f"output[{i}]",
                    label=label,
                    op="output",
                    kind=descriptor_kind(desc),
                    highlight=False,
                    index=i,
                )
                if hasattr(o, "name"):
                    d.add_edge(o.name, f"output[{i}]")
            continue
        d.add_node(
            n.name,
            label=n.name,
            op=n.op,
            kind=descriptor_kind(n.meta.get("desc")),
            highlight=False,
            target=getattr(n.target, "__name__", str(n.target)).removesuffix(".default"),
        )
        if n.op == "placeholder":
            d.nodes[n.name]["index"] = sum(d.nodes[m]["op"] == "placeholder" for m in d) - 1
        for a in n.all_input_nodes:
            d.add_edge(a.name, n.name)
    outputs = {}
    for n in graph.nodes:
        if n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else (n.args[0],)
            outputs = {id(o): f"output[{i}]" for i, o in reversed(list(enumerate(outs)))}
    d.graph["pairs"] = [
        (a.name, outputs.get(id(b), b.name), how)
        if how == "grad"
        else (outputs.get(id(a), a.name), b.name, how)
        for how, _, a, b in joint_pairs(g)
        if b is not None
    ]
    return d


def as_fx_graph(g):
    """The ``fx.Graph`` inside what a learner holds: a joint object (course's or torch's
    ``JointWithDescriptors``, anything with a ``graph_module``), a ``GraphModule`` or a
    ``Graph``.

    Raises:
        TypeError: for anything else, saying what is accepted.
    """
    import torch.fx

    if isinstance(g, torch.fx.Graph):
        return g
    if isinstance(g, torch.fx.GraphModule):
        return g.graph
    gm = getattr(g, "graph_module", None)
    if isinstance(gm, torch.fx.GraphModule):
        return gm.graph
    raise TypeError(
        f"cannot draw a {type(g).__name__}: pass the object export_joint returns, "
        "a torch.fx.GraphModule or a torch.fx.Graph"
    )


def partition_cut(g) -> tuple[list[str], set[str]] | None:
    """Where torch's ``default_partition`` cuts a joint graph: the names of the values the
    forward saves for the backward, and the names of the ops the backward runs (cheap view
    ops such as ``t`` of a saved value are recomputed there rather than saved).

    Runs on a copy of the graph; ``None`` when the graph is no complete joint (no tangent,
    no output descriptors) or the partitioner refuses it.
    """
    import warnings

    import torch.fx
    from torch._functorch.partitioners import default_partition

    graph = as_fx_graph(g)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    (out,) = [n for n in graph.nodes if n.op == "output"] or [None]
    descs = out.meta.get("desc") if out is not None else None
    tangents = {n.name for n in placeholders if _is_tangent(n.name, descriptor_kind(n.meta.get("desc")))}
    if not descs or not tangents:
        return None
    kinds = [descriptor_kind(d) for d in descs]  # the forward's outputs come first, then gradients
    n_forward = kinds.index("GradAOTOutput") if "GradAOTOutput" in kinds else len(kinds)
    copy = torch.fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = torch.fx.GraphModule(graph.owning_module or torch.nn.Module(), copy)
            inputs = [n for n in module.graph.nodes if n.op == "placeholder"]
            _, bw = default_partition(module, inputs, num_fwd_outputs=n_forward)
    except Exception:
        return None
    saved = [n.name for n in bw.graph.nodes if n.op == "placeholder" and n.name not in tangents]
    return saved, {n.name for n in bw.graph.nodes if n.op == "call_function"}


def _is_tangent(name: str, kind: str) -> bool:
    return kind == "TangentAOTInput" or name.startswith("tangents")


def _backward_nodes(d: nx.DiGraph) -> set:
    tangents = [n for n in d if d.nodes[n]["op"] == "placeholder" and _is_tangent(n, d.nodes[n]["kind"])]
    return set().union(*(nx.descendants(d, t) for t in tangents)) if tangents else set()


#: How an edge from a saved value to the backward is drawn.
CUT_STYLE = {"color": "#7b3294", "linewidth": 1.6, "linestyle": (0, (4, 2))}


#: Box outline colours that tie a parameter to its gradient and an output to its tangent.
PAIR_COLORS = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#ff7f0e",
    "#7f7f7f",
]


def _input_note(desc) -> str:
    """A short second line for a placeholder's box, read from its descriptor."""
    kind = descriptor_kind(desc)
    if kind in ("ParamAOTInput", "BufferAOTInput"):
        return f"{kind[:-8].lower()} {desc.target}"
    if kind == "PlainAOTInput":
        return f"input {desc.idx}"
    if kind == "TangentAOTInput":
        out = getattr(desc, "output", None)
        return f"tangent of out {out.idx}" if hasattr(out, "idx") else "tangent"
    return "" if desc is None else kind


# NOTE [Placeholder order costs crossings]
#     ``input_order="placeholder"`` keeps the top row as the graph lists its placeholders, which a
#     learner matches with the descriptors; ``"layout"`` lets the layout reorder that row. On a
#     2-layer MLP the fixed order draws 9 crossings where a free order draws 4, and 9 is the least
#     any drawing has with both rows fixed and every edge pointing down: an exact search over our
#     layering found no fewer, and graphviz's ``dot``, held to the same two rows, also draws 9
#     (tests/test_show.py compares our counts with dot's).


def draw_joint_graph(
    g,
    ax=None,
    max_nodes: int = 300,
    collapse_above: int = 50,
    title: str | None = None,
    input_order: str = "placeholder",
):
    """Draw a joint graph in layers: placeholders on the top row in placeholder order,
    outputs on the bottom row in output order, the ops in between placed to cut edge
    crossings (:func:`course.show.layout.layered_layout`), each box sized to its label.

    Placeholders and outputs are filled by descriptor kind (:data:`KIND_COLORS`); forward
    ops are white, backward ops light orange: those the backward graph runs when torch's
    ``default_partition`` splits the joint (:func:`partition_cut`), whose saved values
    reach the backward along purple dashed edges (the cut); where it cannot split the graph,
    the ops downstream of a tangent, with no cut drawn. A parameter and its
    gradient, and an output and its tangent, share a thick outline colour and the partner's
    name in their label, so no long edge is needed. Above ``collapse_above`` nodes, linear
    chains fold; if that is not enough, the ops merge into a ``forward`` and a ``backward``
    box (:func:`summarise_joint`) and, past 8 of them, the inputs and the outputs into one box
    per descriptor kind (:func:`group_ends`). Above ``max_nodes``, the picture is a one-line
    summary.

    Args:
        g: what :func:`course.joint.export_joint` returns, torch's joint-with-descriptors
            object, a ``GraphModule`` or a ``Graph`` (see :func:`as_fx_graph`).
        input_order: ``"placeholder"`` (default) keeps the top row in placeholder order;
            ``"layout"`` lets the layout reorder it to cut crossings, each input's box
            showing its placeholder index (``in 0``); NOTE [Placeholder order costs
            crossings] says what the fixed order costs.

    Returns:
        The matplotlib Figure.

    Raises:
        TypeError: ``g`` holds no FX graph.
    """

    if input_order not in ("layout", "placeholder"):
        raise ValueError(f"input_order must be 'layout' or 'placeholder', not {input_order!r}")
    graph = as_fx_graph(g)
    full = joint_nx_graph(graph)
    d = _graph_to_draw(full, collapse_above)
    if len(d) > max_nodes:
        return _too_large(full, ax)
    backward, cut_edges = _backward_and_cut(graph, d, full)
    labels, edge_colors = _joint_labels(graph, d, full)
    first, last = (
        sorted((n for n in d if d.nodes[n]["op"] == op), key=lambda n: d.nodes[n]["index"])
        for op in ("placeholder", "output")
    )
    font = 8.0
    sizes = {n: label_size(labels[n], font) for n in d}
    layout = layered_layout(
        d, first=first, last=last, sizes=sizes, row_gap=26.0, fixed=(input_order == "placeholder", True)
    )
    fig, ax, font = new_figure_for(layout, font, ax=ax, extra_height=0.9)
    fills = {n: KIND_COLORS.get(d.nodes[n]["kind"], "#fde2c8" if n in backward else "#ffffff") for n in d}
    draw_boxes(
        d,
        layout,
        labels,
        ax,
        fills,
        font_size=font,
        edge_colors=edge_colors,
        styles={n: {"linewidth": 2.2} for n in edge_colors},
        edge_styles={e: CUT_STYLE for e in cut_edges},
    )
    _joint_legend(fig, d, backward, bool(edge_colors), bool(cut_edges))
    if title is None:
        title = _joint_title(input_order, folded=d is not full)
    if title:
        fig.text(0.5, 1.0, title, ha="center", va="bottom", fontsize=9)
    return fig


def _too_large(full: nx.DiGraph, ax):
    """The picture of a graph past ``max_nodes``: one line, its size and its kinds of node."""
    import matplotlib.pyplot as plt

    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 2))
    ax.set_axis_off()
    kinds = sorted({full.nodes[n]["op"] for n in full})
    ax.text(0.5, 0.5, f"too large to draw: {len(full)} nodes ({', '.join(kinds)})", ha="center", va="center")
    return fig


def _joint_title(input_order: str, folded: bool) -> str:
    return (
        "joint graph: inputs (top"
        + (", placeholder order" if input_order == "placeholder" else "")
        + ") to outputs (bottom, output order)"
        + ("; chains folded" if folded else "")
    )


def _graph_to_draw(full: nx.DiGraph, collapse_above: int) -> nx.DiGraph:
    """``full`` itself when small; else its chains folded and, if still big, the forward and the
    backward one box each, and the inputs and outputs one box per kind."""
    d = collapse_chains(full) if len(full) > collapse_above else full
    return group_ends(summarise_joint(d)) if len(d) > collapse_above else d


def _backward_and_cut(graph, d: nx.DiGraph, full: nx.DiGraph) -> tuple[set, set]:
    """The nodes drawn as backward, and the edges drawn as the cut (saved value -> backward):
    from torch's partition where it splits the graph, else everything below a tangent."""
    cut = partition_cut(graph) if d is full else None
    if not cut:
        return _backward_nodes(d), set()
    outputs = {n for n in d if d.nodes[n]["op"] == "output"}
    backward = {n for n in cut[1] if n in d} | (_backward_nodes(d) & outputs)
    return backward, {(a, b) for a, b in d.edges if a in cut[0] and b in backward}


def _joint_labels(graph, d: nx.DiGraph, full: nx.DiGraph) -> tuple[dict, dict]:
    """Each box's label (an op's aten target, a partner's name, an input's index and note),
    and the outline colour each paired box shares with its partner."""
    labels = {n: d.nodes[n].get("label", n) for n in d}
    for n in d:  # ops: name and aten target
        target = d.nodes[n].get("target")
        if d.nodes[n]["op"] == "call_function" and target and not d.nodes[n].get("collapsed"):
            labels[n] = n if n.startswith(target.split(".")[0]) else f"{n}\n{target}"
    edge_colors = {}
    for k, (a, b, how) in enumerate(p for p in full.graph["pairs"] if p[0] in d and p[1] in d):
        edge_colors[a] = edge_colors[b] = PAIR_COLORS[k % len(PAIR_COLORS)]
        if how == "grad":
            labels[b] += f"\ngrad of {a}"
        else:
            labels[a] += f"\ntangent {b}"
    for i, n in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        if n.name in d:
            note = _input_note(n.meta.get("desc"))
            labels[n.name] = (
                f"{n.name} (in {i})" + (f"\n{note}" if note else "") + labels[n.name][len(n.name) :]
            )
    return labels, edge_colors


def _joint_legend(fig, d: nx.DiGraph, backward: set, paired: bool, cut: bool) -> None:
    """One legend entry per descriptor kind drawn, per side of ops present, and for the outline
    pairs and the cut when the drawing has them."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    used = [k for k in KIND_COLORS if any(d.nodes[n]["kind"] == k for n in d)]
    handles = [Patch(facecolor=KIND_COLORS[k], edgecolor="#333333", label=k) for k in used]
    ops = [n for n in d if d.nodes[n]["op"] == "call_function"]
    handles += [
        Patch(facecolor=fill, edgecolor="#333333", label=f"{side} op")
        for side, fill, present in (
            ("forward", "#ffffff", any(n not in backward for n in ops)),
            ("backward", "#fde2c8", any(n in backward for n in ops)),
        )
        if present
    ]
    if paired:
        label = "same outline: param/grad or output/tangent"
        handles.append(Patch(facecolor="none", edgecolor=PAIR_COLORS[0], linewidth=2.2, label=label))
    if cut:
        handles.append(Line2D([], [], **CUT_STYLE, label="saved for backward (the cut)"))
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=min(4, len(handles)),
        fontsize=7,
        frameon=False,
        bbox_to_anchor=(0.5, 1.0),
    )
