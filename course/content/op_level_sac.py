"""Selective checkpointing as a production trainer writes it: torchtitan's op-level policy.

Lesson 10 (solutions/10_compiler_memory.ipynb) runs one policy eager and under
``torch.compile`` and compares what each keeps for backward. The lesson's own policy saves
every matrix product; this module holds the production baseline beside it, on a block that
has what a transformer block has (matrix products and an attention):

- :class:`AttentionBlock` and :func:`attention_block`: a bias-free block, attention then MLP;
- :func:`op_level_policy`: torchtitan's rule, in our words: keep the outputs of the ops in a
  save list (matrix products, attention, ``max``), but recompute every second matrix product
  of a region. torchtitan writes it in ``torchtitan/distributed/activation_checkpoint.py``
  (``SelectiveAC._wrap_block``, its ``wrapped_policy``; the save list is
  ``_get_default_save_ops``); older versions had it as ``_apply_op_sac``'s ``_custom_policy``,
  with a ``_op_sac_save_list`` in each model's ``parallelize.py``;
- :func:`eager_and_compiled`: one policy on the block, eager and compiled, what each saves
  (named as FX names the nodes), the bytes, and what backward reruns.

Differences from torchtitan: we leave out what a single CPU process never meets (its
collectives, flex attention, compiled kernels, the device-to-host copies it always keeps,
and the shapes it forces to recompute), and we add the CPU's attention op to the save list
(:data:`CPU_ATTENTION`), which torchtitan's list does not name.

>>> policy = op_level_policy()
>>> [policy(None, torch.ops.aten.mm.default).name for _ in range(3)]
['MUST_SAVE', 'PREFER_RECOMPUTE', 'MUST_SAVE']
"""

from __future__ import annotations

import collections
import logging

import torch
from torch import nn
from torch._functorch.partitioners import get_default_op_list
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

__all__ = [
    "CPU_ATTENTION",
    "MATMULS",
    "TORCHTITAN_SAVE_OPS",
    "AttentionBlock",
    "attention_block",
    "eager_and_compiled",
    "op_level_policy",
]


class AttentionBlock(nn.Module):
    """A bias-free transformer block as Llama writes one, its norms left out:
    ``h = x + wo(attention(wq(x), wk(x), wv(x)))``, then ``h + w2(gelu(w1(h)))``. Its six
    Linear layers run as six ``aten.mm`` (no bias, hence no ``addmm``) and its causal
    ``scaled_dot_product_attention`` as one attention op."""

    def __init__(self, d: int = 16, heads: int = 2, hidden: int = 32) -> None:
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w2 = nn.Linear(d, hidden, bias=False), nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape

        def split(y):  # (b, s, d) -> (b, heads, s, d // heads)
            return y.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        a = nn.functional.scaled_dot_product_attention(
            split(self.wq(x)), split(self.wk(x)), split(self.wv(x)), is_causal=True
        )
        h = x + self.wo(a.transpose(1, 2).reshape(b, s, d))
        return h + self.w2(nn.functional.gelu(self.w1(h)))


def attention_block():
    """The :class:`AttentionBlock` the lesson checkpoints and its input (a block in the middle
    of a model: its input needs a gradient), seeded: ``(block, x)``."""
    torch.manual_seed(0)
    return AttentionBlock(), torch.randn(2, 8, 16, requires_grad=True)


#: The matrix products torchtitan counts (``mm``, and ``linear`` where a backend keeps it whole).
MATMULS = (torch.ops.aten.mm.default, torch.ops.aten.linear.default)

#: The single-process part of torchtitan's save list, built as torchtitan builds it: torch's
#: ``compute_intensive_ops`` plus the attention variants, ``max``, ``linear`` and ``topk``
#: that it names itself.
TORCHTITAN_SAVE_OPS = frozenset(
    {op.default for op in get_default_op_list().compute_intensive_ops}
    | {
        torch.ops.aten._scaled_dot_product_cudnn_attention.default,
        torch.ops.aten._scaled_dot_product_attention_math.default,
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default,
        torch.ops.aten.max.default,
        torch.ops.aten.linear.default,
        torch.ops.aten.topk.default,
    }
)

#: The op ``scaled_dot_product_attention`` runs as on a CPU; torchtitan's list does not name it.
CPU_ATTENTION = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


def op_level_policy(save_ops=TORCHTITAN_SAVE_OPS | {CPU_ATTENTION}, every_second_product=True):
    """A fresh policy in torchtitan's op-level style: keep what an op of ``save_ops`` returns,
    recompute the rest, and with ``every_second_product`` recompute the 2nd, 4th, ... matrix
    product of the region too. Make one per region and per trace (a ``context_fn`` calls this,
    as torchtitan's does), so that each count starts at the region's first product.

    >>> policy = op_level_policy({torch.ops.aten.mm.default}, every_second_product=False)
    >>> [policy(None, torch.ops.aten.mm.default).name for _ in range(2)]
    ['MUST_SAVE', 'MUST_SAVE']
    """
    products = 0

    def policy(ctx, op, *args, **kwargs):
        nonlocal products
        if op in MATMULS:
            products += 1
            if every_second_product and products % 2 == 0:
                return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if op in save_ops else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


#: Ops that compute nothing new: views, reshapes, detaches, and a plain backward's seed.
_NOT_WORK = frozenset({"_unsafe_view", "detach", "alias", "ones_like", "expand", "sum"})


def _is_work(name: str) -> bool:
    """Whether the aten op (packet) ``name`` computes values: not a view nor one of _NOT_WORK."""
    packet = getattr(torch.ops.aten, name)
    return name not in _NOT_WORK and not any(getattr(packet, o).is_view for o in packet.overloads())


def _named(op, counts: collections.Counter) -> str:
    """The name FX gives the next node of ``op``: ``mm``, then ``mm_1``, ``mm_2``, ..."""
    base = op.overloadpacket.__name__
    name = f"{base}_{counts[base]}" if counts[base] else base
    counts[base] += 1
    return name


def _eager(make_policy, block, x) -> dict:
    """``block(x)`` under torch's checkpoint with ``make_policy()``, eager: what the policy had
    kept (``name`` or ``name[i]`` for an op's i-th output -> bytes), the ops backward reran
    beyond a plain backward, the gradients, and ``stored``, the bytes torch's own record of what
    it kept adds up to (lesson 9's ``stored_bytes``)."""
    from course.content.lesson09 import OpCounter, stored_bytes

    kept, counts, modes = {}, collections.Counter(), []

    def recorded(policy):
        def answer(ctx, op, *args, **kwargs):
            choice = policy(ctx, op, *args, **kwargs)
            name = _named(op, counts)
            if choice in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
                outs = ctx.op_output if isinstance(ctx.op_output, tuple) else (ctx.op_output,)
                for i, t in enumerate(outs):
                    kept[f"{name}[{i}]" if len(outs) > 1 else name] = t.nbytes
            return choice

        return answer

    def context_fn():
        forward_ctx, recompute_ctx = create_selective_checkpoint_contexts(recorded(make_policy()))
        modes.append(forward_ctx)
        return forward_ctx, recompute_ctx

    leaves = [x, *block.parameters()]
    plain_out = block(x).sum()
    with OpCounter() as plain:
        torch.autograd.grad(plain_out, leaves)
    out = checkpoint(block, x, use_reentrant=False, context_fn=context_fn).sum()
    stored = stored_bytes(modes[0], leaves)  # torch's record, read before backward consumes it
    with OpCounter() as rerun:
        grads = torch.autograd.grad(out, leaves)
    extra = {op: k for op, k in (rerun.counts - plain.counts).items() if _is_work(op)}
    return {"saved": kept, "reruns": dict(sorted(extra.items())), "gradients": list(grads), "stored": stored}


def _saved_name(node) -> str:
    """A saved node's name, a ``getitem`` as ``its op's name[i]`` (as eager's are named), and
    the generator state ``run_and_save_rng_state`` returns first as ``"RNG state"``."""
    if node.target.__name__ != "getitem":
        return node.name
    op = node.args[0]
    if op.target.__name__ == "run_and_save_rng_state":
        return "RNG state" if node.args[1] == 0 else op.args[0].overloadpacket.__name__
    return f"{op.name}[{node.args[1]}]"


def _saved_bytes(node) -> int:
    """A saved value's bytes; a size the graph holds as a symbol (the RNG state's) by its hint,
    the size it had when traced."""
    val = node.meta["val"]
    numel = 1
    for size in val.shape:
        numel *= size.node.hint if isinstance(size, torch.SymInt) else size
    return numel * val.element_size()


def _rerun_op(node, forward_names: set) -> str | None:
    """The op a backward node reruns from forward (by the forward node's name, which the
    partitioner keeps), or None; a random op replayed with its saved generator state counts
    as the op it replays (``run_with_rng_state(state, op, *args)``)."""
    if getattr(node.target, "__name__", "") == "run_with_rng_state":
        return node.args[1].overloadpacket.__name__
    if node.name not in forward_names or not hasattr(node.target, "overloadpacket"):
        return None  # computed for backward, or a getitem
    return node.target.overloadpacket.__name__


def _compiled(make_policy, block, x) -> dict:
    """``block(x)`` under checkpoint with the same policy, compiled (min-cut partitioner): what
    the forward graph saves (name -> bytes; inputs and parameters left out), the tag on each,
    the forward's nodes backward reruns (counted by op), the gradients and the policy calls."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs, calls = {}, collections.Counter()

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs.setdefault(kind, gm)
            calls[kind] += 1
            return gm  # run the FX graph as it is

        return compiler

    def context_fn():
        calls["context_fn"] += 1
        return create_selective_checkpoint_contexts(make_policy())

    backend = aot_autograd(
        fw_compiler=keep("fw"), bw_compiler=keep("bw"), partition_fn=min_cut_rematerialization_partition
    )
    step = torch.compile(
        lambda x: checkpoint(block, x, use_reentrant=False, context_fn=context_fn), backend=backend
    )
    wrap_log = logging.getLogger("torch._higher_order_ops.wrap")  # it warns that context_fn is used
    wrap_log.setLevel(logging.ERROR)
    torch._dynamo.reset()
    try:
        grads = torch.autograd.grad(step(x).sum(), [x, *block.parameters()])
        calls["after the first step"] = calls["context_fn"]
        step(x)  # a second step: the graphs are compiled, nothing is traced
    finally:
        wrap_log.setLevel(logging.NOTSET)
        torch._dynamo.reset()
    fw, bw = graphs["fw"], graphs["bw"]
    saved = [n for n in fw.graph.output_node().args[0][1:] if n.op == "call_function"]
    forward_names = {n.name for n in fw.graph.nodes}
    rerun = collections.Counter(
        _rerun_op(n, forward_names) for n in bw.graph.nodes if n.op == "call_function"
    )
    rerun.pop(None, None)
    return {
        "saved": {_saved_name(n): _saved_bytes(n) for n in saved},
        "tags": {_saved_name(n): getattr(n.meta.get("recompute"), "name", None) for n in saved},
        "reruns": dict(sorted((op, k) for op, k in rerun.items() if _is_work(op))),
        "gradients": list(grads),
        "compiles": calls["fw"],
        "context_fn calls": {
            "first step": calls["after the first step"],
            "second step": calls["context_fn"] - calls["after the first step"],
        },
    }


def eager_and_compiled(make_policy, block_and_input=attention_block) -> dict:
    """One policy (``make_policy()`` makes a fresh one) on ``block_and_input()``, eager and
    compiled: ``{"eager": {...}, "compiled": {...}}``, each with ``saved`` (name -> bytes, named
    as FX names the forward's nodes), ``reruns`` (op -> how many times backward reran it) and
    ``gradients``; the compiled side also has each saved value's ``tags`` and how many times
    ``context_fn`` was called."""
    return {
        "eager": _eager(make_policy, *block_and_input()),
        "compiled": _compiled(make_policy, *block_and_input()),
    }
