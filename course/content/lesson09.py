"""What lesson 09 runs: the model, the programs and the measurements of its memory policies.

Lesson 09 (solutions/09_memory_policies.ipynb) compares eager ways of making room: recompute
(checkpointing, by hand and by torch), save selectively under a budget, offload. The
notebook's tables and the checks of exercises 9.1 to 9.3 run the same things, from here (and
lesson 10's content, :mod:`course.content.lesson10`, partitions the same model):

- :class:`Block` and :func:`make_model`: three residual MLP blocks ``x + down(gelu(up(x)))``;
- ``PROGRAMS``: named programs ``() -> (fn, args, leaves)`` that checkpointing runs;
- :class:`OpCounter`, which counts the aten ops that run, and the measurements built on it:
  :func:`backward_counts`, :func:`plain_backward_counts`, and :func:`run_policy` (a
  selective-checkpointing policy run through torch: bytes stored, ops and FLOPs rerun);
- ``BUDGET``, the bytes exercise 9.3's policies may store;
- ``MEMORY_POLICIES``, :func:`profiled_forward` and :func:`counted_saved_bytes`: keep,
  recompute and offload measured by ``torch.profiler`` (what forward leaves allocated), beside
  what the saved-tensor hooks count;
- :func:`when_answered`, which runs a demonstration of a learner's answer once it is written.

>>> model, x = make_model()
>>> len(model), tuple(x.shape)
(3, (8, 16))
>>> sorted(plain_backward_counts("block").items())[:3]
[('expand', 1), ('gelu_backward', 1), ('mm', 4)]

Which answers are right, and the wrong ones people give, live with the exercises in
course/checks/lesson09/.
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
    "MEMORY_POLICIES",
    "PROGRAMS",
    "Block",
    "OpCounter",
    "backward_counts",
    "counted_saved_bytes",
    "make_model",
    "plain_backward_counts",
    "profiled_forward",
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


def _widths_program(widths=(4, 12, 65, 8), batch=10, seed=5):
    """Linears of different widths with a gelu between: their products differ in FLOPs per byte
    (a Linear's result costs twice its input width in FLOPs per element). The input comes in
    float16 and the step casts it (``aten._to_copy`` takes its dtype as a keyword argument)."""
    torch.manual_seed(seed)
    layers = []
    for d_in, d_out in zip(widths, widths[1:]):
        layers += [nn.Linear(d_in, d_out), nn.GELU()]
    model = nn.Sequential(*layers[:-1])  # no gelu after the last Linear
    x = torch.randn(batch, widths[0]).half()

    def step(x):
        return model(x.float()).pow(2).sum()  # pow saves the last product's result: backward needs it

    return step, (x,), list(model.parameters())


def _batched_program(seed=6):
    """Three kinds of matrix product: a Linear (``aten.addmm``), a product per group of rows
    (``torch.bmm``: 3 groups of 4 rows, summing over 24) and a plain product (``aten.mm``,
    summing over 5 into 20 columns); in the last two the inner size is not the result's
    column count. Each result is read by backward (gelu and pow save their input). The input
    needs no gradient: a module called on a leaf that requires one makes torch's
    ``FlopCounterMode`` run a ``view`` in the recomputation that forward never ran, which
    selective checkpointing refuses."""
    torch.manual_seed(seed)
    linear = nn.Linear(8, 24)
    v = torch.randn(3, 24, 5, requires_grad=True)
    w = torch.randn(5, 20, requires_grad=True)
    x = torch.randn(12, 8)

    def step(x):
        h = nn.functional.gelu(linear(x))  # (12, 24)
        g = nn.functional.gelu(torch.bmm(h.view(3, 4, 24), v))  # (3, 4, 5)
        return (g.view(12, 5) @ w).pow(2).sum()  # (12, 20)

    return step, (x,), [*linear.parameters(), v, w]


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
    "widths 4-12-65-8, float16 input": _widths_program,
    "addmm, bmm and mm": _batched_program,
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


# --- measured, not counted: the profiler's view of keep, recompute and offload -------------


def _offload(model, x):
    with torch.autograd.graph.save_on_cpu():
        return model(x)


#: name -> (model, x) -> output: one forward of the lesson's model under each memory policy.
MEMORY_POLICIES = {
    "keep": lambda model, x: model(x),
    "recompute": lambda model, x: checkpoint(model, x, use_reentrant=False),
    "recompute, no RNG state": lambda model, x: checkpoint(
        model, x, use_reentrant=False, preserve_rng_state=False
    ),
    "offload (save_on_cpu)": _offload,
}


@contextlib.contextmanager
def _native_stderr_silenced():
    """Send what native code writes to stderr to /dev/null for the block: the profiler's
    tracing library logs a line with a timestamp at each start and stop, which a stored
    notebook output must not hold."""
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def profiled_forward(policy: str) -> dict:
    """One forward of :func:`make_model`'s model under ``MEMORY_POLICIES[policy]``, watched by
    ``torch.profiler.profile(profile_memory=True, record_shapes=True)`` inside a
    ``record_function("forward")`` range: what the range left allocated when it ended (its
    ``cpu_memory_usage``: allocations minus frees, the frees outside any op charged to the
    range), the bytes each aten op allocated, and the output's bytes.

    >>> profiled_forward("keep")["allocated by op"]
    {'aten::addmm': 7680, 'aten::gelu': 6144, 'aten::add': 1536}
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    model, x = make_model()
    watch = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True)
    with _native_stderr_silenced(), watch as prof, record_function("forward"):
        out = MEMORY_POLICIES[policy](model, x)
    by_op = collections.Counter()
    for event in prof.events():
        if event.name.startswith("aten::") and event.self_cpu_memory_usage:
            by_op[event.name] += event.self_cpu_memory_usage
    forward = next(e for e in prof.events() if e.name == "forward")
    return {
        "held after forward": forward.cpu_memory_usage,
        "allocated by op": dict(by_op),
        "output": out.nbytes,
    }


def counted_saved_bytes() -> int:
    """The bytes the lesson's model saves for backward, counted by a pack hook: each storage
    once, leaves (the input, the parameters) and their views aside."""
    model, x = make_model()
    storages = {}

    def pack(t):
        base = t if t._base is None else t._base
        if not base.is_leaf:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(storages.values())


def when_answered(demo, *args):
    """``demo(*args)``, a demonstration that runs one of the learner's answers; while that
    answer is still the stub, one line that says so instead of a traceback (what ``check()``
    says of a stub), and None.

    >>> def stub():
    ...     raise NotImplementedError("exercise 9.1")
    >>> when_answered(stub)
    exercise 9.1 is not written yet: write it above, then run this cell again
    """
    try:
        return demo(*args)
    except NotImplementedError as e:
        print(f"{e} is not written yet: write it above, then run this cell again")
        return None
