"""What lessons 10 and 11 run: the models the compiler partitions, and what its graphs hold.

Lesson 10 (solutions/10_compiler_memory.ipynb) reads the compiler's memory decisions: what
torch's partitioners save and how ``activation_memory_budget`` trades bytes for recompute.
Lesson 11 (solutions/11_offload_pass.ipynb) moves saved values to the host with a pass over
the same partitioned graphs. Both notebooks and the checks of their exercises partition the
same models, from here:

- ``OFFLOAD_MODELS``: named models ``() -> (model, x)``, lesson 09's three-block model among
  them (:class:`TwoReaders`, :class:`Scaled`, :class:`ViewReadLast` and :class:`Probed` are the
  odd ones);
- :func:`partitioned`: a model's joint graph, exported with ``course.joint`` and cut by
  torch's default or min-cut partitioner; :func:`compiled_partition`: the two graphs a real
  ``torch.compile`` run hands its compilers;
- :func:`forward_device_peak` and :func:`held_for_backward`: what a forward graph keeps on the
  device, counted by liveness over its nodes; :func:`offloads_before_a_reader`: the copies to
  the host placed where the device cannot free their value yet;
- :class:`NormedBlock` and :func:`flow_graph`: a block with a random op, a reduction and a
  norm, and the flow graph torch's min-cut partitioner cuts for a model (``ban_reasons`` reads
  from it why each node may not be recomputed);
- :func:`knapsack_items`: the items (bytes as a share of the budget's scale, FLOPs) that the
  budget's knapsack weighs for a model at a budget, as torch hands them to its solver.

>>> jd = partitioned("lesson", "min_cut")
>>> jd.num_fwd_outputs
1

Which answers are right, and the wrong ones people give, live with the exercises in
course/checks/lesson10/ and course/checks/lesson11/.
"""

from __future__ import annotations

import pkgutil
from unittest import mock

import torch
from torch import nn

from course.content.lesson09 import Block, make_model, when_answered

__all__ = [
    "OFFLOAD_MODELS",
    "NormedBlock",
    "ban_reasons",
    "flow_graph",
    "knapsack_items",
    "normed_block",
    "Probed",
    "Scaled",
    "TwoReaders",
    "ViewReadLast",
    "compiled_partition",
    "device_put_parts",
    "forward_device_peak",
    "held_for_backward",
    "offloads_before_a_reader",
    "partitioned",
    "when_answered",
]


# --- the models the offloading exercises partition ----------------------------------------


class TwoReaders(Block):
    """A block whose gelu output feeds two Linear layers: ``x + down(g) + side(g)``, so the
    backward graph reads the saved ``g`` twice (once per weight gradient)."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(d, hidden)
        self.side = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = nn.functional.gelu(self.up(x))  # (..., hidden)
        return x + self.down(g) + self.side(g)


class Scaled(Block):
    """A block with a buffer: ``x + down(gelu(up(x)) * scale)``; backward needs ``scale``."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(d, hidden)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)) * self.scale)


class ViewReadLast(Block):
    """A block that reads a view of its saved gelu output after the output's last direct
    reader: ``x + down(g) + g.view(-1).sum() / 2``, so the device must hold ``g`` until the
    view's ``sum`` (torch's ``_find_all_effective_users`` follows the view)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = nn.functional.gelu(self.up(x))
        flat = g.view(-1)  # made before down reads g, read after it
        return x + self.down(g) + flat.sum() / 2


class Probed(nn.Sequential):
    """Blocks that also return a probe of the first block's output, ``(out, 2 * first)``: a
    user output computed before the last layer."""

    def forward(self, x: torch.Tensor):
        first = out = self[0](x)
        for block in list(self)[1:]:
            out = block(out)
        return out, 2 * first


def _probed(seed: int, x_shape: tuple):
    torch.manual_seed(seed)
    return Probed(Block(16, 32), Block(16, 32)), torch.randn(*x_shape)


def _made(seed: int, x_shape: tuple, *blocks: nn.Module):
    torch.manual_seed(seed)
    model = nn.Sequential(*[make() for make in blocks])
    return model, torch.randn(*x_shape)


#: name -> () -> (model, x): the models exercises 11.1 and 11.2 partition.
OFFLOAD_MODELS = {
    "lesson": make_model,
    "four blocks": lambda: make_model(layers=4, d=8, hidden=24, batch=(6,), seed=3),
    "float64": lambda: make_model(layers=2, d=8, hidden=16, batch=(4,), dtype=torch.float64, seed=4),
    "two readers": lambda: _made(5, (4, 16), lambda: TwoReaders(16, 32), lambda: Block(16, 32)),
    "buffers": lambda: _made(6, (4, 8), lambda: Scaled(8, 32), lambda: Scaled(8, 32)),
    "probed": lambda: _probed(8, (4, 16)),
    "a view read last": lambda: _made(9, (4, 16), lambda: ViewReadLast(16, 32), lambda: Block(16, 32)),
    "lesson, on meta": lambda: tuple(t.to("meta") for t in make_model()),
}


def compiled_partition(model_name: str):
    """The forward and backward graphs ``torch.compile(..., dynamic=True)`` hands its compilers
    for ``OFFLOAD_MODELS[model_name]`` (min-cut partitioner), one step run: a namespace with
    ``fw_module``, ``bw_module`` and ``num_fwd_outputs``, as :func:`partitioned` has. Two things
    differ from an export: parameters come in as plain inputs (every placeholder's descriptor
    is ``PlainAOTInput``), and the batch size is a symbol, saved last among the forward's
    outputs and taken first among the backward's placeholders."""
    import types

    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs = {}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind] = gm
            return gm

        return compiler

    model, x = OFFLOAD_MODELS[model_name]()
    torch._dynamo.reset()
    backend = aot_autograd(
        fw_compiler=keep("fw"), bw_compiler=keep("bw"), partition_fn=min_cut_rematerialization_partition
    )
    out = torch.compile(model, dynamic=True, backend=backend)(x)
    out.pow(2).sum().backward()
    torch._dynamo.reset()
    fw = graphs["fw"]
    user = sum(
        d.__class__.__name__ != "SavedForBackwardsAOTOutput" for d in fw.graph.output_node().meta["desc"]
    )
    return types.SimpleNamespace(
        fw_module=fw, bw_module=graphs["bw"], num_fwd_outputs=user, params={}, buffers={}
    )


def partitioned(model_name: str, partitioner: str = "min_cut"):
    """The joint of ``OFFLOAD_MODELS[model_name]`` partitioned by torch's default or min-cut
    partitioner (a ``course.joint`` JointWithDescriptors); ``"compiled, dynamic"`` gives
    :func:`compiled_partition` instead."""
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    if partitioner == "compiled, dynamic":
        return compiled_partition(model_name)
    model, x = OFFLOAD_MODELS[model_name]()
    fn = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}[partitioner]
    jd = export_joint(model, (x,), partition_fn=fn)
    jd.fw_module  # noqa: B018 (read for its effect); the stages run when first read: partition now, under the caller's config
    return jd


# --- what a forward graph holds on the device: a liveness count ---------------------------


def device_put_parts(node) -> tuple:
    """(the value, the device) of a ``prims.device_put`` node, each given by position or by
    keyword (``device_put(a, device)``: its schema's names).

    >>> import torch.fx as fx
    >>> g = fx.Graph()
    >>> a = g.placeholder("a")
    >>> put = g.call_function(torch.ops.prims.device_put.default, (a,), {"device": torch.device("cpu")})
    >>> device_put_parts(put)
    (a, device(type='cpu'))
    """
    given = dict(zip(("a", "device"), node.args))
    given.update(node.kwargs)
    return given["a"], given["device"]


def _is_host_copy(node) -> bool:
    """A ``prims.device_put`` to the CPU: its result lives on the host, not on the device."""
    return (
        node.op == "call_function"
        and node.target == torch.ops.prims.device_put.default
        and torch.device(device_put_parts(node)[1]).type == "cpu"
    )


def _nbytes(val: torch.Tensor) -> int:
    """Bytes of a (fake) tensor; a symbolic size (a graph compiled with dynamic shapes) counts
    at the size it was traced with."""
    from torch.fx.experimental.symbolic_shapes import optimization_hint  # as torch's _size_of reads it

    return optimization_hint(val.numel()) * val.element_size()


def _last_use(node, order: dict) -> int:
    """The position of ``node``'s last reader, a view's readers counted as the base's (a view
    keeps its base's memory alive); the output node counts as the end of the graph."""
    last = order[node]
    for user in node.users:
        last = max(last, order[user])
        if getattr(user.target, "is_view", False):
            last = max(last, _last_use(user, order))
    return last


def forward_device_peak(fw_module) -> int:
    """The most bytes of computed values alive on the device at any node of ``fw_module``'s
    graph, counted by liveness: a value (not a view, not a placeholder, not a copy to the
    host) takes its bytes from the node that computes it to its last reader, following views;
    a value the forward returns stays to the end. Placeholders (parameters, the input) are
    left out: they are on the device before and after, whatever a pass does.

    >>> peak = forward_device_peak(partitioned("lesson", "min_cut").fw_module)
    >>> peak
    14336
    """
    nodes = list(fw_module.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    spans = []  # (first, last, bytes)
    for node in nodes:
        val = node.meta.get("val")
        if node.op != "call_function" or not isinstance(val, torch.Tensor):
            continue
        if getattr(node.target, "is_view", False) or _is_host_copy(node):
            continue
        spans.append((order[node], _last_use(node, order), _nbytes(val)))
    return max(
        (sum(b for first, last, b in spans if first <= i <= last) for i in range(len(nodes))), default=0
    )


def offloads_before_a_reader(fw_module) -> list[str]:
    """The saved values whose copy to the host comes before one of their readers in the forward
    (a view's readers counted as the base's, copies left out): the device holds such a value
    past its copy, so the copy frees nothing where it stands. Sorted names.

    >>> offloads_before_a_reader(partitioned("lesson", "min_cut").fw_module)  # no copies yet
    []
    """
    order = {n: i for i, n in enumerate(fw_module.graph.nodes)}
    early = set()
    for copy in filter(_is_host_copy, fw_module.graph.nodes):
        value = device_put_parts(copy)[0]
        readers = [u for u in value.users if not _is_host_copy(u)]
        while readers:  # the value's readers, a view's readers counted as the base's
            user = readers.pop()
            early |= {value.name} if user.op != "output" and order[user] > order[copy] else set()
            readers += list(user.users) if getattr(user.target, "is_view", False) else []
    return sorted(early)


def held_for_backward(fw_module, num_fwd_outputs: int) -> int:
    """Bytes the forward hands the backward on the device: the saved values it returns that
    are computed (not placeholders, not views) and not copies to the host, each once."""
    saved = fw_module.graph.output_node().args[0][num_fwd_outputs:]
    held = {
        n
        for n in saved
        if n.op == "call_function" and not getattr(n.target, "is_view", False) and not _is_host_copy(n)
    }
    return sum(_nbytes(n.meta["val"]) for n in held)


# --- inside the min-cut partitioner: its flow graph and its knapsack -----------------------


class NormedBlock(nn.Module):
    """``x + down(rms(dropout(gelu(up(x)))))``: one op of each kind the min-cut partitioner
    treats apart (a matrix product, a random op, a reduction, pointwise ops), with the RMS
    norm written out as ``d * rsqrt(mean(d**2) + eps)``."""

    def __init__(self, d: int = 16, hidden: int = 64) -> None:
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = nn.functional.dropout(nn.functional.gelu(self.up(x)), 0.1)
        rms = torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + 1e-5)
        return x + self.down(d * rms)


def normed_block():
    """The :class:`NormedBlock` the lesson partitions and its input, seeded: ``(model, x)``."""
    torch.manual_seed(0)
    return NormedBlock(), torch.randn(8, 16)


def _min_cut_target() -> str:
    """Where the installed torch's ``solve_min_cut`` finds its cut function: the name
    ``partitioners.py`` imports from its own ``min_cut`` module (torch 2.15 on), else
    ``networkx.minimum_cut`` (2.13, 2.14: ``nx.minimum_cut(nx_graph, "source", "sink")``)."""
    import torch._functorch.partitioners as partitioners

    if hasattr(partitioners, "minimum_cut"):
        return "torch._functorch.partitioners.minimum_cut"
    return "networkx.minimum_cut"


def flow_graph(model, x, **config):
    """The first flow graph torch's min-cut partitioner builds and cuts for ``model(x)`` (a
    ``networkx.DiGraph``), under ``torch._functorch.config`` patched with ``config``.

    Each node ``n`` of the joint graph is two vertices, ``n_in`` and ``n_out``, joined by an
    edge whose capacity is what saving ``n`` costs; an edge from ``"source"`` to ``n_in`` of
    infinite capacity bans recomputing ``n``, and its ``reason`` says why (torch's words). We
    catch the graph by watching the function torch cuts it with: ``networkx.minimum_cut`` up to
    torch 2.14, and from 2.15 its own Dinic's ``minimum_cut``
    (``torch/_functorch/_activation_checkpointing/min_cut.py``), which ``partitioners.py``
    imports by that name (:func:`_min_cut_target`).

    >>> g = flow_graph(*normed_block())
    >>> g["source"]["addmm_in"]["reason"]
    'cannot recompute: not in recomputable allowlist'
    """
    from torch._functorch import config as functorch_config
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    target = _min_cut_target()
    cut = pkgutil.resolve_name(target)
    graphs = []

    def watched(graph, *args, **kwargs):
        graphs.append(graph.copy())
        return cut(graph, *args, **kwargs)

    with mock.patch(target, watched), functorch_config.patch(**config):
        export_joint(model, (x,), partition_fn=min_cut_rematerialization_partition).fw_module  # noqa: B018
    return graphs[0]


def ban_reasons(graph) -> dict:
    """``node name -> reason`` for each node the flow graph ``graph`` bans from recomputation
    (its edge from the source), the reason without torch's ``"cannot recompute: "`` prefix.

    >>> ban_reasons(flow_graph(*normed_block()))["mean"]
    'reduction op'
    """
    prefix = "cannot recompute: "
    return {
        vertex.removesuffix("_in"): data.get("reason", "").removeprefix(prefix)
        for vertex, data in graph["source"].items()
    }


def knapsack_items(model, x, budget: float, **config) -> dict | None:
    """What torch's budget knapsack weighs for ``model(x)`` at ``activation_memory_budget=budget``:
    ``{"nodes", "memory", "runtimes", "max_memory"}`` as torch hands them to its solver, or
    None when the budget was met before the knapsack (at 0, at 1, or by a relaxed min-cut).

    ``memory`` is each node's bytes as a share of the budget's scale (the bytes between saving
    only the inputs and saving what budget 1 saves), ``runtimes`` its FLOPs by torch's estimate.

    >>> items = knapsack_items(*make_model(), 0.25)
    >>> items["nodes"], round(sum(items["memory"]), 3)
    (['addmm', 'addmm_2', 'addmm_4', 'addmm_1', 'addmm_3'], 0.868)
    """
    import torch._functorch.partitioners as partitioners
    from torch._functorch import config as functorch_config

    from course.aot.joint import export_joint

    solve = partitioners._optimize_runtime_with_given_memory
    seen = {}

    def watched(joint_graph, memory, runtimes, max_memory, node_info, nodes):
        if not seen:
            seen.update(nodes=[n.name for n in nodes], memory=list(memory), runtimes=list(runtimes))
            seen["max_memory"] = max_memory
        return solve(joint_graph, memory, runtimes, max_memory, node_info, nodes)

    patched = functorch_config.patch(activation_memory_budget=budget, **config)
    with mock.patch.object(partitioners, "_optimize_runtime_with_given_memory", watched), patched:
        export_joint(model, (x,), partition_fn=partitioners.min_cut_rematerialization_partition).fw_module  # noqa: B018
    return seen or None
