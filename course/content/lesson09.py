"""What lesson 09 runs: the model, the programs and the measurements of its memory policies.

Lesson 09 (solutions/09_memory_policies.ipynb) compares ways of making room: recompute
(checkpointing, by hand and by torch), save selectively under a budget, let the compiler's
partitioner decide, offload. The notebook's tables and the checks of exercises 9.1 to 9.6 run
the same things, from here:

- :class:`Block` and :func:`make_model`: three residual MLP blocks ``x + down(gelu(up(x)))``;
- ``PROGRAMS``: named programs ``() -> (fn, args, leaves)`` that checkpointing runs;
  ``OFFLOAD_MODELS``: named models ``() -> (model, x)`` that :func:`partitioned` exports and
  partitions with torch's default or min-cut partitioner;
- :class:`OpCounter`, which counts the aten ops that run, and the measurements built on it:
  :func:`backward_counts`, :func:`plain_backward_counts`, and :func:`run_policy` (a
  selective-checkpointing policy run through torch: bytes stored, ops and FLOPs rerun);
- ``BUDGET``, the bytes exercise 9.3's policies may store.

>>> model, x = make_model()
>>> len(model), tuple(x.shape)
(3, (8, 16))
>>> sorted(plain_backward_counts("block").items())[:3]
[('expand', 1), ('gelu_backward', 1), ('mm', 4)]

Which answers are right, and the wrong ones people give, live with the exercises in
course/checks/lesson09.py.
"""

from __future__ import annotations

import collections
import contextlib
import weakref

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
from torch.utils.flop_counter import FlopCounterMode

__all__ = [
    "BOOKKEEPING",
    "BUDGET",
    "OFFLOAD_MODELS",
    "PROGRAMS",
    "Block",
    "OpCounter",
    "Probed",
    "Scaled",
    "TwoReaders",
    "backward_counts",
    "compiled_partition",
    "forward_device_peak",
    "held_for_backward",
    "make_model",
    "partitioned",
    "plain_backward_counts",
    "run_policy",
    "stored_bytes",
    "when_answered",
]

# --- the model and the programs ------------------------------------------------------------


class Block(nn.Module):
    """A residual MLP block: ``x + down(gelu(up(x)))``."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))  # (..., d)


def make_model(
    layers: int = 3, d: int = 16, hidden: int = 64, batch=(8,), dtype=torch.float32, seed: int = 0
):
    """``(model, x)``: ``layers`` blocks in an ``nn.Sequential`` (children ``"0"``, ``"1"``, ...)."""
    torch.manual_seed(seed)
    model = nn.Sequential(*[Block(d, hidden) for _ in range(layers)]).to(dtype)
    return model, torch.randn(*batch, d, dtype=dtype)


#: Ops that only move bookkeeping around (detaching, accumulating into .grad); the counts
#: compare the rest.
BOOKKEEPING = frozenset({"detach", "alias", "add_"})


class OpCounter(TorchDispatchMode):
    """Counts every aten op that runs while it is on, by name (``"addmm"``), bookkeeping
    left out; and keeps a weak reference to every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter = collections.Counter()
        self.results: list[weakref.ref] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in BOOKKEEPING:
            self.counts[name] += 1
            if isinstance(out, torch.Tensor):
                self.results.append(weakref.ref(out))
        return out

    def alive(self, *besides: torch.Tensor) -> int:
        """How many of the recorded results are still alive, the tensors ``besides`` left out."""
        kept = [r() for r in self.results]
        return sum(t is not None and all(t is not b for b in besides) for t in kept)


def _block_program(dtype=torch.float32, batch=(4,), seed=0):
    torch.manual_seed(seed)
    up, down = nn.Linear(8, 32).to(dtype), nn.Linear(32, 8).to(dtype)
    x = torch.randn(*batch, 8, dtype=dtype, requires_grad=True)

    def block(x):
        return down(nn.functional.gelu(up(x))).sum()

    return block, (x,), [x, *up.parameters(), *down.parameters()]


def _pointwise_program():
    torch.manual_seed(1)
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)

    def chain(x, w):
        return ((x @ w).sin() * x.exp()).sum()

    return chain, (x, w), [x, w]


def _exp_program():
    torch.manual_seed(7)
    x = torch.randn(64, 64, requires_grad=True)

    def chain(x):
        return x.exp().sin().sum()  # exp saves its own output, sin its input (the same tensor)

    return chain, (x,), [x]


def _model_program(**sizes):
    model, x = make_model(**sizes)

    def step(x):
        return model(x).pow(2).sum()

    return step, (x,), list(model.parameters())


#: name -> () -> (fn, args, leaves): the programs exercises 9.1 and 9.3 run.
PROGRAMS = {
    "block": _block_program,
    "pointwise": _pointwise_program,
    "exp": _exp_program,
    "model": _model_program,
    "float64, 3-d input": lambda: _block_program(torch.float64, (2, 3), seed=2),
    "four blocks": lambda: _model_program(layers=4, d=8, hidden=24, batch=(6,), seed=3),
    "two blocks, float64": lambda: _model_program(
        layers=2, d=8, hidden=16, batch=(4,), dtype=torch.float64, seed=4
    ),
    "model, batch 16": lambda: _model_program(batch=(16,)),
}


def backward_counts(fn, args, leaves, run_forward, after_forward=None):
    """(forward counts, backward counts, results alive after forward, gradients);
    ``after_forward()`` runs between the two passes."""
    with OpCounter() as fwd:
        out = run_forward(fn, args)
    alive = fwd.alive(out, *leaves)
    if after_forward is not None:
        after_forward()
    with OpCounter() as bwd:
        grads = torch.autograd.grad(out, leaves)
    return fwd.counts, bwd.counts, alive, list(grads)


def plain_backward_counts(name: str) -> collections.Counter:
    """What backward runs for program ``name`` with no hooks and no checkpoint."""
    fn, args, leaves = PROGRAMS[name]()
    return backward_counts(fn, args, leaves, lambda f, a: f(*a))[1]


# --- exercise 9.3's budget, and a policy measured by torch ----------------------------

#: The bytes exercise 9.3's policies may store (each storage once, parameters left out).
BUDGET = 2600


def stored_bytes(caching_mode, leaves) -> int:
    """Bytes of the distinct storages a selective-checkpointing policy kept, read from the
    forward context ``create_selective_checkpoint_contexts`` made (its ``storage``), the
    storages of ``leaves`` (the parameters) left out. Read it after forward: backward
    consumes what was kept."""
    owned = {p.untyped_storage().data_ptr() for p in leaves}
    seen = {}
    for entry in torch.utils._pytree.tree_leaves(caching_mode.storage):
        t = getattr(entry, "val", entry)  # a kept result is wrapped (its version is checked)
        if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in owned:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _backward_flops(out, leaves):
    with FlopCounterMode(display=False) as flops:
        grads = torch.autograd.grad(out, leaves)
    return flops.get_total_flops(), list(grads)


def run_policy(policy, name, watch=contextlib.nullcontext):
    """Program ``name`` under torch's checkpoint with ``policy``: gradients, the bytes the
    policy stored, the ops backward reruns beyond a plain backward, and the FLOPs it runs
    beyond a plain backward (counted by torch's ``FlopCounterMode``). ``policy`` may also be
    ``("for", make)``: ``make(fn, args)`` builds the policy for this very program, inside
    ``watch(leaves)`` (a check watches what the plan does to the parameters)."""
    fn, args, leaves = PROGRAMS[name]()
    if isinstance(policy, tuple):
        with watch(leaves):
            policy = policy[1](fn, args)
    plain_flops, _ = _backward_flops(fn(*args), leaves)
    modes = []

    def context_fn():
        forward_ctx, recompute_ctx = create_selective_checkpoint_contexts(policy)
        modes.append(forward_ctx)
        return forward_ctx, recompute_ctx

    out = checkpoint(fn, *args, use_reentrant=False, context_fn=context_fn)
    stored = stored_bytes(modes[0], leaves)  # measured after forward: backward consumes it
    with OpCounter() as bwd:
        flops, grads = _backward_flops(out, leaves)
    extra = bwd.counts - plain_backward_counts(name)
    return {
        "gradients": grads,
        "bytes the policy stored": stored,
        "ops rerun in backward": dict(sorted(extra.items())),
        "FLOPs rerun": flops - plain_flops,
    }


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


#: name -> () -> (model, x): the models exercises 9.5 and 9.6 partition.
OFFLOAD_MODELS = {
    "lesson": make_model,
    "four blocks": lambda: make_model(layers=4, d=8, hidden=24, batch=(6,), seed=3),
    "float64": lambda: make_model(layers=2, d=8, hidden=16, batch=(4,), dtype=torch.float64, seed=4),
    "two readers": lambda: _made(5, (4, 16), lambda: TwoReaders(16, 32), lambda: Block(16, 32)),
    "buffers": lambda: _made(6, (4, 8), lambda: Scaled(8, 32), lambda: Scaled(8, 32)),
    "probed": lambda: _probed(8, (4, 16)),
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


def _is_host_copy(node) -> bool:
    """A ``prims.device_put`` to the CPU: its result lives on the host, not on the device."""
    return (
        node.op == "call_function"
        and node.target == torch.ops.prims.device_put.default
        and torch.device(node.args[1]).type == "cpu"
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


def when_answered(demo, *args):
    """``demo(*args)``, a demonstration that runs one of the learner's answers; while that
    answer is still the stub, one line that says so instead of a traceback (what ``check()``
    says of a stub), and None.

    >>> def stub():
    ...     raise NotImplementedError("exercise 9.6")
    >>> when_answered(stub)
    exercise 9.6 is not written yet: write it above, then run this cell again
    """
    try:
        return demo(*args)
    except NotImplementedError as e:
        print(f"{e} is not written yet: write it above, then run this cell again")
        return None
