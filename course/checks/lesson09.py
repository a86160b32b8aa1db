"""Checks for lesson 9: memory policies, recompute or offload, from saved-tensor hooks to the compiler.

Each exercise is registered once, here (see docs/authoring.md). Torch is every oracle:

- 9.1 a pair of saved-tensor hooks that recomputes instead of storing: judged against
  ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` with early stop off
  (gradients, how many times each aten op runs in forward and in backward, and how many
  forward results the hooks keep alive);
- 9.2 predict what the recomputation reruns (torch's checkpoint, early stop on);
- 9.3 a selective-checkpointing policy that stores at most a budget of bytes and leaves the
  fewest FLOPs to rerun: run through torch's ``create_selective_checkpoint_contexts``, its
  stored bytes (the cost) and the FLOPs backward reruns (torch's ``FlopCounterMode``)
  judged against the reference's;
- 9.4 predict what the min-cut partitioner recomputes at ``activation_memory_budget=0``;
- 9.5 choose the saved values an offloading pass should move, from a partitioned forward
  graph and its descriptors; judged against the reference, and in the lesson against
  torch's ``choose_offload_sets``.

The model and programs the lesson and the checks share live here too, so the notebook
shows exactly what the checks judge.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import weakref

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
    set_checkpoint_early_stop,
)
from torch.utils.flop_counter import FlopCounterMode

from course.aot import descriptors as cd
from course.aot import fx_utils as cf
from course.checks import case, exercise, handed, predict, wrong

# --- the model and the programs of the lesson -----------------------------------------------


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


def _model_program(**sizes):
    model, x = make_model(**sizes)

    def step(x):
        return model(x).pow(2).sum()

    return step, (x,), list(model.parameters())


#: name -> () -> (fn, args, leaves): the programs exercises 9.1 and 9.3 run.
PROGRAMS = {
    "block": _block_program,
    "pointwise": _pointwise_program,
    "model": _model_program,
    "float64, 3-d input": lambda: _block_program(torch.float64, (2, 3), seed=2),
    "four blocks": lambda: _model_program(layers=4, d=8, hidden=24, batch=(6,), seed=3),
    "two blocks, float64": lambda: _model_program(
        layers=2, d=8, hidden=16, batch=(4,), dtype=torch.float64, seed=4
    ),
    "model, batch 16": lambda: _model_program(batch=(16,)),
}


def _backward_counts(fn, args, leaves, run_forward, after_forward=None):
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
    return _backward_counts(fn, args, leaves, lambda f, a: f(*a))[1]


# --- Exercise 9.1: recompute instead of store, as a pair of hooks ---------------------------


def recompute_hooks(fn, *args):
    """Reference solution: (pack, unpack) hooks that keep no activation; the first unpack
    reruns ``fn(*args)`` and hands back the tensors the rerun saves, in the same order."""
    recomputed = []  # the rerun's saved tensors, in pack order
    counter = itertools.count()

    def pack(t):
        return next(counter)  # an index, never the tensor

    def unpack(index):
        if not recomputed:

            def record(t):
                recomputed.append(t)
                return t

            with torch.enable_grad(), saved_tensors_hooks(record, lambda t: t):
                fn(*args)  # backward runs with grad mode off: turn it on, or nothing is saved
        return recomputed[index]

    return pack, unpack


class _TorchCheckpoint:
    """What the oracle of 9.1 returns instead of hooks: "run torch's checkpoint here"."""


def _oracle_hooks(fn, *args):
    """torch.utils.checkpoint, non-reentrant, early stop off (so it reruns the whole function)."""
    return _TorchCheckpoint()


def _run_hooks(answer, name):
    """Forward and backward of program ``name`` under the answer's hooks (or torch's
    checkpoint, for the oracle): what runs, what stays alive, what pack returns."""
    fn, args, leaves = PROGRAMS[name]()
    hooks = answer(fn, *args)
    returned = []  # what pack returned, for each saved tensor

    def forward(f, a):
        if isinstance(hooks, _TorchCheckpoint):
            return checkpoint(f, *a, use_reentrant=False)
        pack, unpack = hooks

        def watched(t):
            returned.append(isinstance(pack_result := pack(t), torch.Tensor))
            return pack_result

        with saved_tensors_hooks(watched, unpack):
            return f(*a)

    with set_checkpoint_early_stop(False):
        fwd, bwd, alive, grads = _backward_counts(fn, args, leaves, forward)
    return {
        "gradients": grads,
        "ops in forward": dict(fwd),
        "ops in backward": dict(bwd),
        "forward results kept alive": alive,
        "tensors pack returned": sum(returned),
    }


def _identity_hooks(fn, *args):
    return (lambda t: t), (lambda t: t)


def _index_but_keep(fn, *args):
    kept = []

    def pack(t):
        kept.append(t)
        return len(kept) - 1

    return pack, kept.__getitem__


def _recompute_variant(enable_grad=True, cache=True):
    def hooks(fn, *args):
        counter, recomputed = itertools.count(), []

        def unpack(index):
            if not recomputed or not cache:
                recomputed.clear()

                def record(t):
                    recomputed.append(t)
                    return t

                with torch.enable_grad() if enable_grad else contextlib.nullcontext():
                    with saved_tensors_hooks(record, lambda t: t):
                        fn(*args)
            return recomputed[index]

        return (lambda t: next(counter)), unpack

    return hooks


def _recompute_hooks_by_dict(fn, *args):
    """A right answer written differently: packs are numbered by a dict's length, and the
    rerun fills a dict once, under torch.autograd.grad-style grad mode switched on."""
    order = {}
    rerun = {}

    def pack(t):
        order[len(order)] = None
        return len(order) - 1

    def unpack(k):
        if not rerun:
            torch.set_grad_enabled(True)
            try:
                with saved_tensors_hooks(lambda t: rerun.setdefault(len(rerun), t), lambda t: t):
                    fn(*args)
            finally:
                torch.set_grad_enabled(False)
        return rerun[k]

    return pack, unpack


exercise(
    "9.1",
    name="recompute_hooks",
    title="Checkpointing as a pair of saved-tensor hooks: keep nothing, recompute on the first unpack",
    solution=recompute_hooks,
    oracle=_oracle_hooks,
    run=_run_hooks,
    points=3,
    cases=[case("block", label="block(x) = down(gelu(up(x))).sum(), x of shape (4, 8)")],
    hidden=[
        case("pointwise", label="((x @ w).sin() * x.exp()).sum(), two leaves"),
        case("model", label="the lesson's three-block model, model(x).pow(2).sum()"),
        case("float64, 3-d input", label="the block in float64 on a (2, 3, 8) input"),
    ],
    wrong=[
        wrong(
            _identity_hooks,
            "your pack hook returns the tensor itself, so autograd keeps every activation "
            "(see 'forward results kept alive') and backward never reruns anything. Pack must "
            "return something small that lets unpack find the tensor again later.",
        ),
        wrong(
            _index_but_keep,
            "pack returns an index, but it also puts the tensor in a list: the activation is "
            "still held (by you instead of autograd), so nothing is saved and nothing reruns.",
        ),
        wrong(
            _recompute_variant(enable_grad=False),
            "unpack runs during backward, where grad mode is off: the rerun records no graph "
            "and saves nothing, so there is nothing to hand back. Rerun the function with "
            "grad mode switched on.",
        ),
        wrong(
            _recompute_variant(cache=False),
            "the function reruns on every unpack (see 'ops in backward'): one rerun yields all "
            "the saved tensors at once; keep them and serve later unpacks from what you kept.",
        ),
    ],
    right=[_recompute_hooks_by_dict],
    hint="autograd calls pack once per saved tensor, in order, during forward, and unpack when "
    "backward needs one. If pack keeps only where a tensor came in the order, the first unpack "
    "can recreate all of them by running the function again, as forward did.",
)

# --- Exercise 9.2: predict what the recomputation reruns ------------------------------------

PREDICTED_OPS = ("addmm", "gelu", "sum")


def _rerun_in_backward():
    """How many more times addmm, gelu and sum run in backward under torch's checkpoint
    (non-reentrant, early stop on, the default) than in a plain backward, for ``block``."""
    fn, args, leaves = PROGRAMS["block"]()
    _, bwd, _, _ = _backward_counts(fn, args, leaves, lambda f, a: checkpoint(f, *a, use_reentrant=False))
    extra = bwd - plain_backward_counts("block")
    return {op: extra[op] for op in PREDICTED_OPS}


predict(
    "9.2",
    name="predicted_reruns",
    title="Predict: which of block's forward ops does backward rerun under checkpoint, and how often?",
    truth=_rerun_in_backward,
    solution={"addmm": 1, "gelu": 1, "sum": 0},
    wrong=[
        wrong(
            {"addmm": 0, "gelu": 0, "sum": 0},
            "checkpoint kept none of block's activations: backward has to make them again, "
            "by running forward ops a second time.",
        ),
        wrong(
            {"addmm": 2, "gelu": 1, "sum": 1},
            "the recomputation stops early: once every tensor forward saved has been saved "
            "again, torch stops the rerun. sum saves no tensor; is the last addmm needed?",
        ),
        wrong(
            {"addmm": 2, "gelu": 1, "sum": 0},
            "close: the rerun stops at the moment the last saved tensor is saved again, and an "
            "op saves its inputs before its kernel runs. The second addmm's saves are its "
            "inputs: gelu's output and the transposed weight.",
        ),
        wrong(
            {"addmm": 1, "gelu": 0, "sum": 0},
            "the second Linear saves gelu's output, and gelu saves its input: both must be "
            "recomputed, so gelu reruns too.",
        ),
    ],
    right=[{"sum": 0, "gelu": 1, "addmm": 1}],
    hint="list what each op of block saves (addmm: its input and the transposed weight; gelu: "
    "its input; sum: no tensor), then rerun the forward in your head and stop as soon as the "
    "last of those has been saved again.",
)

# --- Exercise 9.3: a policy that meets a memory budget with the least recompute ------------

MATMULS = frozenset({"mm", "addmm", "bmm"})

#: The bytes exercise 9.3's policies may store (each storage once, parameters left out).
BUDGET = 2600


def _products(fn, args):
    """[(bytes of the result, FLOPs)] of every matrix product one forward of ``fn`` runs, in order."""
    found = []

    class Profile(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kwargs=None):
            out = func(*a, **(kwargs or {}))
            if func.overloadpacket.__name__ in MATMULS:  # mm(a, b), addmm(c, a, b), bmm(a, b)
                found.append((out.nbytes, 2 * out.numel() * a[-2].shape[-1]))
            return out

    with torch.no_grad(), Profile():
        fn(*args)
    return found


def _by_position(keep):
    """A policy that saves the matrix products at positions ``keep`` (counted from 0, in
    forward order), and recomputes everything else; the recomputation counts afresh."""
    met = {False: 0, True: 0}  # matrix products met so far: in forward, in the recomputation

    def policy(ctx, op, *args, **kwargs):
        if op.overloadpacket.__name__ not in MATMULS:
            return CheckpointPolicy.PREFER_RECOMPUTE
        position = met[ctx.is_recompute]
        met[ctx.is_recompute] += 1
        return CheckpointPolicy.MUST_SAVE if position in keep else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def budget_policy(fn, args, budget):
    """Reference solution: a selective-checkpointing policy for ``fn(*args)`` that stores at
    most ``budget`` bytes and leaves the fewest FLOPs to rerun: the best subset of its matrix
    products (a 0/1 knapsack, by brute force: the programs have a handful of products)."""
    products = _products(fn, args)
    best, best_key = (), (0, 0)
    for size in range(len(products) + 1):
        for subset in itertools.combinations(range(len(products)), size):
            nbytes = sum(products[i][0] for i in subset)
            key = (sum(products[i][1] for i in subset), -nbytes)  # most FLOPs kept, then fewest bytes
            if nbytes <= budget and key > best_key:
                best, best_key = subset, key
    return _by_position(set(best))


def _stored_bytes(caching_mode, leaves) -> int:
    """Bytes of the distinct storages the policy kept (parameters' storages left out)."""
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


def run_policy(policy, name):
    """Program ``name`` under torch's checkpoint with ``policy``: gradients, the bytes the
    policy stored, the ops backward reruns beyond a plain backward, and the FLOPs it runs
    beyond a plain backward (counted by torch's ``FlopCounterMode``). ``policy`` may also be
    ``("for", make)``: ``make(fn, args)`` builds the policy for this very program."""
    fn, args, leaves = PROGRAMS[name]()
    if isinstance(policy, tuple):
        policy = policy[1](fn, args)
    plain_flops, _ = _backward_flops(fn(*args), leaves)
    modes = []

    def context_fn():
        forward_ctx, recompute_ctx = create_selective_checkpoint_contexts(policy)
        modes.append(forward_ctx)
        return forward_ctx, recompute_ctx

    out = checkpoint(fn, *args, use_reentrant=False, context_fn=context_fn)
    stored = _stored_bytes(modes[0], leaves)  # measured after forward: backward consumes it
    with OpCounter() as bwd:
        flops, grads = _backward_flops(out, leaves)
    extra = bwd.counts - plain_backward_counts(name)
    return {
        "gradients": grads,
        "bytes the policy stored": stored,
        "ops rerun in backward": dict(sorted(extra.items())),
        "FLOPs rerun": flops - plain_flops,
    }


def _run_budget(answer, name, budget):
    r = run_policy(("for", lambda fn, args: answer(fn, args, budget)), name)
    return {"gradients": r["gradients"], "FLOPs rerun in backward": r["FLOPs rerun"]}


def _budget_cost(answer, name, budget):
    r = run_policy(("for", lambda fn, args: answer(fn, args, budget)), name)
    return {"bytes stored": r["bytes the policy stored"]}


def _always(policy):
    return lambda fn, args, budget: lambda ctx, op, *a, **k: policy


def save_every_product(fn, args, budget):
    return _by_position(set(range(len(_products(fn, args)))))


def in_forward_order(fn, args, budget):
    keep, total = set(), 0
    for i, (nbytes, _) in enumerate(_products(fn, args)):
        if total + nbytes <= budget:
            keep.add(i)
            total += nbytes
    return _by_position(keep)


def _only_mm(fn, args, budget):
    """Keyed on aten.mm alone: nn.Linear's addmm never matches."""

    def policy(ctx, op, *a, **k):
        return (
            CheckpointPolicy.MUST_SAVE
            if op == torch.ops.aten.mm.default
            else CheckpointPolicy.PREFER_RECOMPUTE
        )

    return policy


def _by_weight_and_ratio(fn, args, budget):
    """A right answer written differently: greedy by FLOPs per byte (the programs' products all
    cost the same FLOPs, so the smallest results first is the knapsack's optimum here), and the
    decision keyed on the storage of the product's last argument, not on a count."""
    sizes = {}

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kwargs=None):
            out = func(*a, **(kwargs or {}))
            if func in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
                key = a[-1].untyped_storage().data_ptr()
                sizes[key] = (out.numel() * out.element_size(), 2 * out.numel() * a[-2].shape[-1])
            return out

    with torch.no_grad(), Seen():
        fn(*args)
    chosen, total = set(), 0
    for key, (nbytes, _flops) in sorted(sizes.items(), key=lambda kv: -kv[1][1] / kv[1][0]):
        if total + nbytes <= budget:
            chosen.add(key)
            total += nbytes

    def policy(ctx, op, *a, **k):
        if op in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
            return a[-1].untyped_storage().data_ptr() in chosen  # True: save
        return False

    return policy


exercise(
    "9.3",
    name="budget_policy",
    title="A selective-checkpointing policy that meets a memory budget with the least recompute",
    solution=budget_policy,
    run=_run_budget,
    cost=_budget_cost,
    budget={"bytes stored": BUDGET},
    points=3,
    cases=[case("model", BUDGET, label=f"the lesson's three-block model, budget {BUDGET} bytes")],
    hidden=[
        case("pointwise", BUDGET, label="((x @ w).sin() * x.exp()).sum(): one aten.mm"),
        case("four blocks", BUDGET, label="four narrower blocks, budget 2600 bytes"),
        case("two blocks, float64", BUDGET, label="two blocks in float64: every product fits"),
        case("model, batch 16", BUDGET, label="the lesson's model on 16 rows: no first Linear fits"),
    ],
    wrong=[
        wrong(
            _always(CheckpointPolicy.MUST_SAVE),
            "that policy saves every op's result: nothing reruns, but it stores far more than the "
            "budget (see the cost line). Save only what is worth its bytes.",
        ),
        wrong(
            _always(CheckpointPolicy.PREFER_RECOMPUTE),
            "nothing was stored, so every product reruns in backward: the budget allows keeping "
            "some. Spend it on the matrix products (the ops with FLOPs to redo), the most FLOPs per byte first.",
        ),
        wrong(
            save_every_product,
            "saving every matrix product reruns nothing, but their results take more than the "
            "budget on the larger programs: choose which ones to keep.",
        ),
        wrong(
            in_forward_order,
            "within budget, but you kept products in the order forward meets them: an early wide "
            "result (the first Linear's, 64 columns) uses up the budget that several narrow ones, "
            "each as costly to redo, would have used better. Choose by FLOPs saved per byte.",
        ),
        wrong(
            _only_mm,
            "keyed on aten.mm alone: nn.Linear on a batch runs one aten.addmm (bias included), so "
            "your policy never saves a Linear's product. Count mm, addmm and bmm.",
        ),
    ],
    right=[_by_weight_and_ratio],
    cost_hint="your policy reruns the fewest FLOPs, but it stores more than the budget: count each "
    "saved result's bytes (numel times element size) and keep the total within it.",
    hint="profile one forward first (a TorchDispatchMode that records each matrix product's result "
    "bytes and FLOPs, 2*m*k*n), choose the products that keep the most FLOPs within the budget, then "
    "answer MUST_SAVE for those, counted in order; ctx.is_recompute tells the recomputation apart.",
)

# --- Exercise 9.4: predict what the min-cut partitioner recomputes --------------------------


def _recomputed_at_budget(budget: float = 0.0):
    """How many addmm and gelu nodes the backward graph of the lesson's model holds, with
    torch's min-cut partitioner at ``activation_memory_budget=budget``."""
    from torch._functorch import config as functorch_config
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    model, x = make_model()
    with functorch_config.patch(activation_memory_budget=budget):
        bw = export_joint(model, (x,), partition_fn=min_cut_rematerialization_partition).bw_module
    ops = collections.Counter(
        n.target.overloadpacket.__name__
        for n in bw.graph.nodes
        if n.op == "call_function" and hasattr(n.target, "overloadpacket")
    )
    return {"addmm": ops["addmm"], "gelu": ops["gelu"]}


predict(
    "9.4",
    name="predicted_recomputed",
    title="Predict: at activation_memory_budget=0, how many addmm and gelu does the backward graph rerun?",
    truth=_recomputed_at_budget,
    solution={"addmm": 5, "gelu": 3},
    wrong=[
        wrong(
            {"addmm": 6, "gelu": 3},
            "not every addmm is needed: the last block's second Linear feeds only the output "
            "add, and backward needs neither that add nor the product.",
        ),
        wrong(
            {"addmm": 3, "gelu": 3},
            "the first Linear of blocks 1 and 2 needs its input, the previous block's output "
            "x + down(...): rebuilding it reruns that block's second addmm too.",
        ),
        wrong(
            {"addmm": 0, "gelu": 0},
            "that is budget 1.0 (save what is cheapest to keep). At budget 0 the partitioner "
            "keeps as little as it can and recomputes the rest from the inputs.",
        ),
        wrong(
            {"addmm": 0, "gelu": 3},
            "at budget 0 even the matrix products are recomputed: only the inputs and the "
            "parameters are left to the backward.",
        ),
    ],
    right=[{"gelu": 3, "addmm": 5}],
    hint="list what backward needs for each block (the input of each Linear, the input of "
    "gelu), then trace each one back to the graph's inputs, counting the addmm and gelu on "
    "the way; an op needed twice is recomputed once.",
)

# --- Exercise 9.5: choose what an offloading pass moves -------------------------------------


def _is_view(node) -> bool:
    return node.op == "call_function" and getattr(node.target, "is_view", False)


def _saved_for_backward(fw_module):
    out = fw_module.graph.output_node()
    return [
        n
        for n, d in zip(out.args[0], out.meta["desc"])
        if isinstance(cd.from_torch(d), cd.SavedForBackwardsAOTOutput)
    ]


def choose_offload(fw_module, last_layer, min_bytes):
    """Reference solution: the names of the saved-for-backward values an offloading pass should
    move to the host."""
    last = {
        node
        for fqn, node in cf.get_named_param_nodes(fw_module.graph).items()
        if fqn.startswith(last_layer + ".")
    }

    memo = {}

    def uses_last_layer(node):  # computed, directly or not, from a last-layer parameter?
        if node not in memo:
            memo[node] = node in last or any(uses_last_layer(i) for i in node.all_input_nodes)
        return memo[node]

    chosen = set()
    for node in _saved_for_backward(fw_module):
        val = node.meta["val"]
        if node.op == "placeholder" or _is_view(node):  # inputs stay; a view shares its base
            continue
        if val.numel() * val.element_size() < min_bytes or uses_last_layer(node):
            continue
        chosen.add(node.name)
    return chosen


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
}


def partitioned(model_name: str, partitioner: str = "min_cut"):
    """The joint of ``OFFLOAD_MODELS[model_name]`` partitioned by torch's default or min-cut
    partitioner (a ``course.joint`` JointWithDescriptors)."""
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    model, x = OFFLOAD_MODELS[model_name]()
    fn = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}[partitioner]
    jd = export_joint(model, (x,), partition_fn=fn)
    jd.fw_module  # noqa: B018 (read for its effect); the stages run when first read: partition now, under the caller's config
    return jd


def _run_choice(answer, model_name, partitioner, last_layer, min_bytes):
    chosen = answer(partitioned(model_name, partitioner).fw_module, last_layer, min_bytes)
    return sorted(chosen)


def _choice_variant(skip_placeholders=True, skip_views=True, use_min_bytes=True, skip_last=True):
    def choose(fw_module, last_layer, min_bytes):
        last_prefix = last_layer + "."
        chosen = set()
        for node in _saved_for_backward(fw_module):
            if skip_placeholders and node.op == "placeholder":
                continue
            if skip_views and _is_view(node):
                continue
            val = node.meta["val"]
            if use_min_bytes and val.numel() * val.element_size() < min_bytes:
                continue
            if skip_last:
                stack, found = [node], False
                while stack and not found:
                    n = stack.pop()
                    desc = n.meta.get("desc") if n.op == "placeholder" else None
                    found = (
                        desc is not None
                        and isinstance(cd.from_torch(desc), cd.ParamAOTInput)
                        and desc.target.startswith(last_prefix)
                    )
                    stack.extend(n.all_input_nodes)
                if found:
                    continue
            chosen.add(node.name)
        return chosen

    return choose


def _choose_by_walking_forward(fw_module, last_layer, min_bytes):
    """A right answer written differently: mark every node downstream of the last layer's
    parameters in one walk over the graph, then filter the saved values."""
    tainted = set()
    for node in fw_module.graph.nodes:
        desc = node.meta.get("desc") if node.op == "placeholder" else None
        is_last_param = (
            desc is not None
            and isinstance(cd.from_torch(desc), cd.ParamAOTInput)
            and desc.target.split(".")[0] == last_layer
        )
        if is_last_param or any(i in tainted for i in node.all_input_nodes):
            tainted.add(node)
    keep_out = lambda n: n.op == "placeholder" or _is_view(n) or n in tainted  # noqa: E731
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if not keep_out(n) and n.meta["val"].nbytes >= min_bytes
    }


exercise(
    "9.5",
    name="choose_offload",
    title="Choose what an offloading pass moves: activations only, no small ones, not the last layer",
    solution=choose_offload,
    run=_run_choice,
    points=3,
    timeout=30,  # each case partitions a model; the first also warms up the tracer
    cases=[
        case(
            "lesson",
            "min_cut",
            "2",
            1024,
            label="the lesson's model, min-cut, last layer '2', min_bytes=1024",
        ),
        case("lesson", "min_cut", "2", 0, label="the lesson's model, min-cut, last layer '2', min_bytes=0"),
    ],
    hidden=[
        case("lesson", "default", "2", 1024, label="the lesson's model, default partitioner"),
        case("four blocks", "min_cut", "3", 500, label="four narrower blocks, min_bytes=500"),
        case("float64", "default", "1", 0, label="two blocks in float64"),
    ],
    wrong=[
        wrong(
            _choice_variant(skip_placeholders=False),
            "you chose placeholders: a parameter (or the input) is saved for backward but lives "
            "on the device anyway, held by the module or the caller; moving a copy frees nothing.",
        ),
        wrong(
            _choice_variant(skip_views=False),
            "you chose views (aten.t of a weight): a view shares its base's memory, so copying "
            "it frees nothing, and torch's pass refuses to offload views.",
        ),
        wrong(
            _choice_variant(use_min_bytes=False),
            "small tensors stay: a copy below min_bytes costs more in latency than it frees. "
            "Size a value from node.meta['val'].",
        ),
        wrong(
            _choice_variant(skip_last=False),
            "the last layer stays: backward needs its activations first, right after forward "
            "ends, so there is no time to hide the copy. Leave out values computed from the last "
            "layer's parameters.",
        ),
    ],
    right=[_choose_by_walking_forward],
    hint="start from the values the forward returns for backward (their descriptors say which), "
    "and keep only the ones whose copy would free device memory in time to matter.",
)

# --- Exercise 9.6: an offload pass that inserts the copies ----------------------------------

#: The copy both directions use (torch's pass inserts the same op).
DEVICE_PUT = torch.ops.prims.device_put.default
HOST = torch.device("cpu")


def offload_pass(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """Reference solution: offload what :func:`choose_offload` picks. In the forward, each
    chosen saved value is copied to the host and the forward returns the copy; in the
    backward, the copy is put back on the value's device before the first node that reads it,
    and every reader reads the reloaded value. Both graphs are linted and recompiled."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    saved_inputs = bw_module.graph.find_nodes(op="placeholder")  # saved values first, then tangents
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name not in chosen:
            continue
        with fw_module.graph.inserting_before(out):
            returned[num_fwd_outputs + k] = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
        held = saved_inputs[k]
        first_reader = next(n for n in bw_module.graph.nodes if held in n.all_input_nodes)
        with bw_module.graph.inserting_before(first_reader):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        held.replace_all_uses_with(reload, delete_user_cb=lambda user: user is not reload)  # noqa: B023 (called in this iteration)
    out.args = (tuple(returned),)
    for gm in (fw_module, bw_module):
        gm.graph.lint()
        gm.recompile()


class _CountCopies(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.copies += func == DEVICE_PUT
        return func(*args, **(kwargs or {}))


def _is_copy(node) -> bool:
    return node.op == "call_function" and node.target == DEVICE_PUT


def _origin(node) -> str:
    """The name of the value a chain of copies starts from."""
    while _is_copy(node):
        node = node.args[0]
    return node.name


def _torch_refuses(model_name, partitioner, names):
    """The names among ``names`` that torch's ``choose_offload_sets`` will not offload."""
    from torch._functorch._activation_offloading import activation_offloading as ao
    from torch.utils._ordered_set import OrderedSet

    jd = partitioned(model_name, partitioner)
    fw = jd.fw_module
    for node in fw.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in names
    static = OrderedSet([*cf.get_param_nodes(fw.graph), *cf.get_buffer_nodes(fw.graph)])
    ao.choose_offload_sets(fw, jd.num_fwd_outputs, static)
    return sorted(set(names) - {n.name for n in fw.graph.nodes if n.meta.get("saved_for_offloading")})


def _offload_outcome(jd, x):
    """What the graphs look like after a pass, and what they compute."""
    fw, bw, k = jd.fw_module, jd.bw_module, jd.num_fwd_outputs
    returned = list(fw.graph.output_node().args[0])
    moved = {i: _origin(n) for i, n in enumerate(returned[k:]) if _is_copy(n)}
    held = bw.graph.find_nodes(op="placeholder")
    direct = sorted(moved[i] for i in moved if any(not _is_copy(u) for u in held[i].users))
    try:
        for gm in (fw, bw):
            gm.graph.lint()
    except Exception as e:  # noqa: BLE001 - what lint says becomes the outcome
        return {"offloaded": sorted(moved.values()), "graphs lint": f"{type(e).__name__}"}
    with _CountCopies() as fwd_copies:
        outs = fw(*jd.params.values(), *jd.buffers.values(), x)
    with _CountCopies() as bwd_copies:
        grads = bw(*outs[k:], 2 * outs[0])[: len(jd.params)]
    return {
        "offloaded": sorted(moved.values()),
        "graphs lint": True,
        "forward returns a reloaded copy": sorted(
            _origin(n) for n in returned[k:] if _is_copy(n) and _is_copy(n.args[0])
        ),
        "backward readers of the host copy, not the reloaded value": direct,
        "copies run in forward": fwd_copies.copies,
        "copies run in backward": bwd_copies.copies,
        "output": outs[0],
        "gradients": list(grads),
    }


def _run_pass(answer, model_name, partitioner, last_layer, min_bytes):
    jd = partitioned(model_name, partitioner)
    model, x = OFFLOAD_MODELS[model_name]()
    with handed(params=list(jd.params.values())):
        answer(jd.fw_module, jd.bw_module, jd.num_fwd_outputs, last_layer, min_bytes)
    outcome = _offload_outcome(jd, x)
    outcome["torch's choose_offload_sets refuses"] = _torch_refuses(
        model_name, partitioner, outcome["offloaded"]
    )
    return outcome


def _pass_variant(
    choose=choose_offload, every_reader=True, reload_in_forward=False, recompile=True, insert_reload=True
):
    """Offload passes that go wrong in one way each (exercise 9.6's known wrong answers)."""

    def offload(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
        chosen = choose(fw_module, last_layer, min_bytes)
        out = fw_module.graph.output_node()
        returned = list(out.args[0])
        held_all = bw_module.graph.find_nodes(op="placeholder")
        for k, node in enumerate(returned[num_fwd_outputs:]):
            if node.name not in chosen:
                continue
            with fw_module.graph.inserting_before(out):
                copy = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
                if reload_in_forward:
                    copy = fw_module.graph.call_function(DEVICE_PUT, (copy, node.meta["val"].device))
            returned[num_fwd_outputs + k] = copy
            if reload_in_forward:
                continue
            held = held_all[k]
            readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
            place = (
                bw_module.graph.inserting_before(readers[0]) if insert_reload else contextlib.nullcontext()
            )
            with place:
                reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
            for reader in readers if every_reader else readers[:1]:
                reader.replace_input_with(held, reload)
        out.args = (tuple(returned),)
        if recompile:
            for gm in (fw_module, bw_module):
                gm.recompile()

    return offload


def _strictly_larger(fw_module, last_layer, min_bytes):
    return choose_offload(fw_module, last_layer, min_bytes + 1)


def _pass_copying_after_each_value(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """A right answer written differently: the rules walked forward once (9.5's other right
    answer), each offload placed right after its value, each reload right after the last
    placeholder, and the readers rewired one by one."""
    chosen = _choose_by_walking_forward(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    held_all = list(bw_module.graph.find_nodes(op="placeholder"))
    new_args = []
    for position, node in enumerate(out.args[0]):
        if position < num_fwd_outputs or node.name not in chosen:
            new_args.append(node)
            continue
        with fw_module.graph.inserting_after(node):
            new_args.append(fw_module.graph.call_function(DEVICE_PUT, args=(node, torch.device("cpu"))))
        held = held_all[position - num_fwd_outputs]
        with bw_module.graph.inserting_after(held_all[-1]):
            back = bw_module.graph.call_function(DEVICE_PUT, args=(held, node.meta["val"].device))
        for user in [u for u in held.users if u is not back]:
            user.replace_input_with(held, back)
    out.args = (tuple(new_args),)
    fw_module.graph.lint()
    bw_module.graph.lint()
    fw_module.recompile()
    bw_module.recompile()


exercise(
    "9.6",
    name="offload_pass",
    title="An offload pass: choose the activations, insert the copies, rewire the backward",
    solution=offload_pass,
    run=_run_pass,
    points=4,
    timeout=30,
    cases=[
        case(
            "lesson",
            "min_cut",
            "2",
            1024,
            label="the lesson's model, min-cut, last layer '2', min_bytes=1024",
        ),
    ],
    hidden=[
        case(
            "lesson",
            "default",
            "2",
            512,
            label="the default partitioner, min_bytes=512: the 512-byte adds move",
        ),
        case(
            "lesson", "min_cut", "2", 513, label="min_bytes=513: the 512-byte adds sit just under it and stay"
        ),
        case(
            "two readers", "min_cut", "1", 0, label="a block whose saved gelu output two backward nodes read"
        ),
        case("buffers", "default", "1", 0, label="blocks with a buffer that backward needs"),
        case("float64", "min_cut", "1", 0, label="two blocks in float64"),
    ],
    wrong=[
        wrong(
            _pass_variant(choose=_choice_variant(skip_placeholders=False)),
            "you moved placeholders: the model's input (and, in a model with buffers, the buffers) "
            "is held by the caller or the module for the whole step, so a host copy frees nothing; "
            "torch's choose_offload_sets refuses them too. Offload computed activations only.",
        ),
        wrong(
            _pass_variant(choose=_choice_variant(skip_views=False)),
            "you moved the views of the weights (aten.t): their memory is the parameters', which "
            "stay on the device anyway, so the copy frees nothing. Leave views alone.",
        ),
        wrong(
            _pass_variant(choose=_choice_variant(skip_last=False)),
            "you moved the last layer's activations: backward reads them first, right after forward "
            "ends, so no compute is left to hide their copies. Leave out what the last layer computes.",
        ),
        wrong(
            _pass_variant(choose=_strictly_larger),
            "a value of exactly min_bytes is large enough to move: the rule is at least min_bytes.",
        ),
        wrong(
            _pass_variant(every_reader=False),
            "one backward node reads the reloaded value, but another still reads the host copy: "
            "when a saved value has several readers in the backward, every one of them must be "
            "rewired (replace_all_uses_with, keeping the reload's own input).",
        ),
        wrong(
            _pass_variant(reload_in_forward=True),
            "your forward copies each value to the host and straight back, and returns the device "
            "copy: the device holds it between forward and backward after all. The reload belongs "
            "in the backward graph, before the first node that reads the value.",
        ),
        wrong(
            _pass_variant(recompile=False),
            "your graphs look right but never ran: a GraphModule keeps running the code generated "
            "when it was built until you call recompile() after changing its graph (see the "
            "copies run in forward and backward).",
        ),
        wrong(
            _pass_variant(insert_reload=False),
            "the reload was added at the end of the backward graph, after the nodes that read it, so "
            "the graph no longer lints (a value used before it is defined). Insert it with "
            "graph.inserting_before(the first reader), and call graph.lint() to find such mistakes.",
        ),
    ],
    right=[_pass_copying_after_each_value],
    hint="three parts: the same rules as 9.5 for what to move; in the forward, a copy to the host "
    "that the forward returns in the value's place; in the backward, a copy back that every node "
    "reading the value reads instead. Then make the graph modules run their new graphs.",
)
