"""Checks for lesson 9: memory policies, recompute or offload, from saved-tensor hooks to the compiler.

Each exercise is registered once, here (see docs/authoring.md). Torch is every oracle:

- 9.1 a pair of saved-tensor hooks that recomputes instead of storing: judged against
  ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` with early stop off
  (gradients, how many times each aten op runs in forward and in backward, how many
  forward results the hooks keep alive, and how many tensors made in backward outlive three
  steps and a ``gc.collect()``);
- 9.2 predict what the recomputation reruns (torch's checkpoint, early stop on);
- 9.3 a selective-checkpointing policy that stores at most a budget of bytes and leaves the
  fewest FLOPs to rerun: run through torch's ``create_selective_checkpoint_contexts``, its
  stored bytes (the cost) and the FLOPs backward reruns (torch's ``FlopCounterMode``)
  judged against the reference's;
- 9.4 predict what the min-cut partitioner recomputes at ``activation_memory_budget=0``;
- 9.5 choose the saved values an offloading pass should move, from a partitioned forward
  graph and its descriptors (and once from a forward ``torch.compile`` built); judged against
  the reference, and in the lesson against torch's ``choose_offload_sets``;
- 9.6 insert the copies: the graphs looked at (what moved, who reads what, where each copy
  goes, the forward's device peak by liveness) and run, beside torch's
  ``choose_offload_sets``; torch's own ``offload_chosen_sets`` may not do the surgery.

The model, the programs and the measurements the lesson and the checks share (``make_model``,
``PROGRAMS``, ``OFFLOAD_MODELS``, ``partitioned``, ``run_policy``, ``BUDGET``) are lesson
content, in course/content/lesson09.py, so the notebook shows exactly what the checks judge.
Two of 9.3's known wrong answers, ``save_every_product`` and ``in_forward_order``, are also
rows of the notebook's table of policies; they stay here, with the answers.
"""

from __future__ import annotations

import collections
import copy
import functools
import gc
import itertools
import sys
import types

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    set_checkpoint_early_stop,
)

from course.aot import descriptors as cd
from course.aot import fx_utils as cf
from course.checks import case, exercise, get, handed, predict, wrong
from course.checks.solutions.lesson09 import (
    budget_policy,
    choose_offload,
    offload_pass,
    predicted_recomputed,
    predicted_reruns,
    recompute_hooks,
)
from course.content.lesson09 import (
    BUDGET,
    OFFLOAD_MODELS,
    PROGRAMS,
    OpCounter,
    backward_counts,
    forward_device_peak,
    make_model,
    partitioned,
    plain_backward_counts,
    run_policy,
)

# --- Speed: what the checks trace once --------------------------------------------------
#
# A failing check runs every known wrong answer on every case to find the hint. Two things keep
# that within seconds: each case's partition is traced once and handed to every call as a copy
# (an answer edits the graphs in place), and the outcome of a known answer of ours, which leaves
# nothing behind and never changes, is computed once per case.


@functools.cache
def _partition_once(model_name: str, partitioner: str, budget: float):
    return partitioned(model_name, partitioner)


def _fresh_partition(model_name: str, partitioner: str):
    """A partition of ``OFFLOAD_MODELS[model_name]`` to hand an answer: its graphs and
    parameters are copies of the one partition traced for the case, under the current
    ``activation_memory_budget``."""
    from torch._functorch import config as functorch_config

    jd = _partition_once(model_name, partitioner, functorch_config.activation_memory_budget)
    return types.SimpleNamespace(
        fw_module=_copy_module(jd.fw_module),
        bw_module=_copy_module(jd.bw_module),
        num_fwd_outputs=jd.num_fwd_outputs,
        params={k: v.detach().clone() for k, v in jd.params.items()},
        buffers={k: v.detach().clone() for k, v in jd.buffers.items()},
    )


def _copy_module(gm):
    """A GraphModule over a copy of ``gm``'s graph: the same node names, each node's metadata
    copied one level deep (an answer may add keys), the fake values shared (a compiled graph's
    cannot be deep-copied)."""
    graph = torch.fx.Graph()
    returned, output = graph.graph_copy(gm.graph, {}, return_output_node=True)
    graph.output(returned).meta = dict(output.meta)
    return torch.fx.GraphModule(gm, graph)


@functools.cache
def _known_answers() -> tuple:
    """Our own answers to 9.1, 9.3, 9.5 and 9.6 (solution, oracle, wrong and right ones) that
    leave nothing behind: their outcomes are kept per case."""
    found = []
    for exercise_id in ("9.1", "9.3", "9.5", "9.6"):
        ex = get(exercise_id)
        found += [
            a for a in (ex.solution, ex.oracle, *(w.answer for w in ex.wrong), *ex.right) if a is not None
        ]
    return tuple(a for a in found if a is not _plans_with_a_backward)  # it leaves .grad behind


@functools.cache
def _kept(run, answer, case: tuple):
    return run(answer, *case)


def _once_per_case(run):
    """``run``, computed once per case for the answers of :func:`_known_answers`."""

    @functools.wraps(run)
    def remembered(answer, *case):
        if not any(answer is known for known in _known_answers()):
            return run(answer, *case)
        return copy.deepcopy(_kept(run, answer, case))

    return remembered


# --- Exercise 9.1: recompute instead of store, as a pair of hooks ---------------------------


class _TorchCheckpoint:
    """What the oracle of 9.1 returns instead of hooks: "run torch's checkpoint here"."""


def _oracle_hooks(fn, *args):
    """torch.utils.checkpoint, non-reentrant, early stop off (so it reruns the whole function)."""
    return _TorchCheckpoint()


@_once_per_case
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
        fwd, bwd, alive, grads = backward_counts(fn, args, leaves, forward)
        outcome = {
            "gradients": grads,
            "ops in forward": dict(fwd),
            "ops in backward": dict(bwd),
            "forward results kept alive": alive,
            "tensors pack returned": sum(returned),
        }
        if name in _LEAK_PROGRAMS:  # three more steps: on the small programs only
            outcome["results alive after 3 steps and gc.collect()"] = _alive_after_backward(answer, name)
    return outcome


#: The programs on which 9.1's check also counts what outlives backward.
_LEAK_PROGRAMS = ("block", "exp", "pointwise")


def _alive_after_backward(answer, name, steps: int = 3) -> int:
    """How many tensors made by ops in backward (the rerun's among them) outlive ``steps``
    forward and backward passes of program ``name`` and a ``gc.collect()``: what a pair of
    hooks leaks per step."""
    made = []
    for _ in range(steps):
        fn, args, leaves = PROGRAMS[name]()
        hooks = answer(fn, *args)
        if isinstance(hooks, _TorchCheckpoint):
            out = checkpoint(fn, *args, use_reentrant=False)
        else:
            with saved_tensors_hooks(*hooks):
                out = fn(*args)
        with OpCounter() as bwd:
            torch.autograd.grad(out, leaves)
        made.extend(bwd.results)
        del fn, args, leaves, hooks, out
    gc.collect()
    return sum(ref() is not None for ref in made)


def _identity_hooks(fn, *args):
    return (lambda t: t), (lambda t: t)


def _index_but_keep(fn, *args):
    kept = []

    def pack(t):
        kept.append(t)
        return len(kept) - 1

    return pack, kept.__getitem__


def _rerun_keeping_its_graph(fn, *args):
    """BAD: the rerun's tensors recorded and handed back as they are, not detached."""
    counter, recomputed = itertools.count(), []

    def unpack(index):
        if not recomputed:

            def record(t):
                recomputed.append(t)  # t still holds the rerun's graph
                return t

            with torch.enable_grad(), saved_tensors_hooks(record, lambda t: t):
                fn(*args)
        return recomputed[index]

    return (lambda t: next(counter)), unpack


def _rerun_without_grad_mode(fn, *args):
    """BAD: the rerun happens where unpack runs, in backward, where grad mode is off."""
    counter, recomputed = itertools.count(), []

    def unpack(index):
        if not recomputed:

            def record(t):
                recomputed.append(t.detach())
                return t.detach()

            with saved_tensors_hooks(record, lambda t: t):
                fn(*args)  # no torch.enable_grad(): nothing is saved, nothing recorded
        return recomputed[index]

    return (lambda t: next(counter)), unpack


def _rerun_on_every_unpack(fn, *args):
    """BAD: the function reruns for every saved tensor backward unpacks."""
    counter, recomputed = itertools.count(), []

    def unpack(index):
        recomputed.clear()  # what the last rerun saved is thrown away

        def record(t):
            recomputed.append(t.detach())
            return t.detach()

        with torch.enable_grad(), saved_tensors_hooks(record, lambda t: t):
            fn(*args)
        return recomputed[index]

    return (lambda t: next(counter)), unpack


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
                with saved_tensors_hooks(lambda t: rerun.setdefault(len(rerun), t.detach()), lambda t: t):
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
    cases=[
        case("block", label="block(x) = down(gelu(up(x))).sum(), x of shape (4, 8)"),
        case("exp", label="x.exp().sin().sum(), x of shape (64, 64): exp saves its own output"),
    ],
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
            _rerun_keeping_its_graph,
            "the rerun's tensors you keep and hand back still carry the rerun's graph (their "
            "grad_fn), and that graph holds tensors too: exp saves its own output, so the output "
            "and its node hold each other (lesson 3's cycle), and they outlive backward and "
            "gc.collect() (see 'results alive after 3 steps'). Keep and hand back t.detach(), as "
            "torch's _recomputation_hook does.",
        ),
        wrong(
            _rerun_without_grad_mode,
            "unpack runs during backward, where grad mode is off: the rerun records no graph "
            "and saves nothing, so there is nothing to hand back. Rerun the function with "
            "grad mode switched on.",
        ),
        wrong(
            _rerun_on_every_unpack,
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
    _, bwd, _, _ = backward_counts(fn, args, leaves, lambda f, a: checkpoint(f, *a, use_reentrant=False))
    extra = bwd - plain_backward_counts("block")
    return {op: extra[op] for op in PREDICTED_OPS}


predict(
    "9.2",
    name="predicted_reruns",
    title="Predict: which of block's forward ops does backward rerun under checkpoint, and how often?",
    truth=_rerun_in_backward,
    solution=predicted_reruns,
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
            "op saves its inputs before its kernel runs. Ask of the last op that saves something "
            "whether its kernel has to run for its saves to happen.",
        ),
        wrong(
            {"addmm": 1, "gelu": 0, "sum": 0},
            "the second Linear saves gelu's output, and gelu saves its input: both must be "
            "recomputed, so gelu reruns too.",
        ),
    ],
    right=[{"sum": 0, "gelu": 1, "addmm": 1}],
    hint="list what each op of block saves, then rerun the forward in your head and stop as "
    "soon as the last of those has been saved again.",
)

# --- Exercise 9.3: a policy that meets a memory budget with the least recompute ------------

MATMULS = frozenset({"mm", "addmm", "bmm"})


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
    forward order), and recomputes everything else. Torch asks a policy once per op, in
    forward only (the recomputation replays its answers by position; ``ctx.is_recompute`` is
    always False on torch 2.13), so one count serves."""
    met = itertools.count()  # matrix products met so far

    def policy(ctx, op, *args, **kwargs):
        if op.overloadpacket.__name__ not in MATMULS:
            return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if next(met) in keep else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _watched(leaves):
    return handed(parameters=list(leaves))  # a plan that runs backward fills their .grad


@_once_per_case
def _run_budget(answer, name, budget):
    r = run_policy(("for", lambda fn, args: answer(fn, args, budget)), name, watch=_watched)
    return {"gradients": r["gradients"], "FLOPs rerun in backward": r["FLOPs rerun"]}


@_once_per_case
def _budget_cost(answer, name, budget):
    r = run_policy(("for", lambda fn, args: answer(fn, args, budget)), name)
    return {"bytes stored": r["bytes the policy stored"]}


def _save_everything(fn, args, budget):
    """BAD: every op's result saved, whatever the budget."""

    def policy(ctx, op, *a, **k):
        return CheckpointPolicy.MUST_SAVE

    return policy


def _recompute_everything(fn, args, budget):
    """BAD: nothing saved, whatever the budget allows."""

    def policy(ctx, op, *a, **k):
        return CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def save_every_product(fn, args, budget):
    return _by_position(set(range(len(_products(fn, args)))))


def in_forward_order(fn, args, budget):
    keep, total = set(), 0
    for i, (nbytes, _) in enumerate(_products(fn, args)):
        if total + nbytes <= budget:
            keep.add(i)
            total += nbytes
    return _by_position(keep)


def _plans_with_a_backward(fn, args, budget):
    """BAD: a warm-up step before planning, whose backward fills the .grad of the parameters
    fn closes over."""
    fn(*args).backward()  # writes .grad into the model the plan is for
    return budget_policy(fn, args, budget)


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
            _save_everything,
            "that policy saves every op's result: nothing reruns, but it stores far more than the "
            "budget (see the cost line). Save only what is worth its bytes.",
        ),
        wrong(
            _recompute_everything,
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
            _plans_with_a_backward,
            "your plan runs a backward while it profiles, and that backward writes .grad into the "
            "model's parameters (fn closes over them): a plan must leave the model as it found it. "
            "Profile one forward under torch.no_grad(), as the spec says.",
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
    "answer MUST_SAVE for those, counted in forward order (torch asks the policy once per op, in "
    "forward only).",
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
    solution=predicted_recomputed,
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


def _graph_state(fw_module) -> tuple:
    """What a look at the graph must leave as it was: its code and every node's metadata keys."""
    return fw_module.code, [
        (n.name, sorted(n.meta), n.meta.get("should_offload")) for n in fw_module.graph.nodes
    ]


@_once_per_case
def _run_choice(answer, model_name, partitioner, last_layer, min_bytes):
    fw = _fresh_partition(model_name, partitioner).fw_module
    before = _graph_state(fw)
    chosen = answer(fw, last_layer, min_bytes)
    return {"chosen": sorted(chosen), "the graph left as it was": _graph_state(fw) == before}


def _computed_from_last_layer(node, last_layer) -> bool:
    """Whether ``node`` is computed, directly or not, from a parameter of ``last_layer``: a
    walk up its inputs (the part of 9.5 the wrong answers below get right)."""
    stack = [node]
    while stack:
        n = stack.pop()
        desc = n.meta.get("desc") if n.op == "placeholder" else None
        if (
            desc is not None
            and isinstance(cd.from_torch(desc), cd.ParamAOTInput)
            and desc.target.startswith(last_layer + ".")
        ):
            return True
        stack.extend(n.all_input_nodes)
    return False


def _value_bytes(node) -> int:
    val = node.meta["val"]
    return val.numel() * val.element_size()


def _chooses_placeholders(fw_module, last_layer, min_bytes):
    """BAD: placeholders (the input, parameters) chosen with the activations."""
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if not _is_view(n)  # a view is left out, a placeholder is not
        and _value_bytes(n) >= min_bytes
        and not _computed_from_last_layer(n, last_layer)
    }


def _chooses_views(fw_module, last_layer, min_bytes):
    """BAD: views (aten.t of a weight) chosen with the activations."""
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if n.op != "placeholder"  # a placeholder is left out, a view is not
        and _value_bytes(n) >= min_bytes
        and not _computed_from_last_layer(n, last_layer)
    }


def _chooses_small_values(fw_module, last_layer, min_bytes):
    """BAD: min_bytes ignored: values of any size chosen."""
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if n.op != "placeholder" and not _is_view(n) and not _computed_from_last_layer(n, last_layer)
    }


def _chooses_the_last_layer(fw_module, last_layer, min_bytes):
    """BAD: the last layer's activations chosen too."""
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if n.op != "placeholder" and not _is_view(n) and _value_bytes(n) >= min_bytes  # no last-layer test
    }


def _chooses_strictly_larger(fw_module, last_layer, min_bytes):
    """BAD: a value of exactly min_bytes left out."""
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if n.op != "placeholder"
        and not _is_view(n)
        and _value_bytes(n) > min_bytes  # > where the spec says at least
        and not _computed_from_last_layer(n, last_layer)
    }


def _chooses_among_every_output(fw_module, last_layer, min_bytes):
    """BAD: no descriptor filter: the model's own outputs chosen with the saved values."""
    return {
        n.name
        for n in fw_module.graph.output_node().args[0]  # every output, the user's included
        if n.op != "placeholder"
        and not _is_view(n)
        and _value_bytes(n) >= min_bytes
        and not _computed_from_last_layer(n, last_layer)
    }


def _sizes_with_nbytes(fw_module, last_layer, min_bytes):
    """BAD: sizes read with .nbytes, which a symbolic size (a dynamic-shape graph) refuses."""
    return {
        n.name
        for n in _saved_for_backward(fw_module)
        if n.op != "placeholder"
        and not _is_view(n)
        and n.meta["val"].nbytes >= min_bytes  # raises on a graph compiled with dynamic=True
        and not _computed_from_last_layer(n, last_layer)
    }


def _chooses_and_tags(fw_module, last_layer, min_bytes):
    """BAD: the right choice, left behind as tags on the graph it was handed."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    for node in fw_module.graph.nodes:
        if node.name in chosen:
            node.meta["should_offload"] = True  # the caller's graph, changed
    return chosen


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
        if not keep_out(n) and n.meta["val"].numel() * n.meta["val"].element_size() >= min_bytes
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
        case(
            "lesson",
            "min_cut",
            "2",
            2048,
            label="min_bytes=2048: the 2048-byte activations sit exactly on it",
        ),
        case("probed", "min_cut", "1", 0, label="a model that also returns twice its first block's output"),
        case(
            "lesson",
            "compiled, dynamic",
            "2",
            1024,
            label="a forward from torch.compile: parameters come in as plain inputs, so no descriptor "
            "names the last layer",
        ),
    ],
    wrong=[
        wrong(
            _chooses_strictly_larger,
            "a value of exactly min_bytes is large enough to move: the rule is at least min_bytes.",
        ),
        wrong(
            _chooses_among_every_output,
            "you chose among all of the forward's outputs: the first ones are the model's own "
            "outputs, which the caller holds after forward anyway (torch's pass refuses them). "
            "Keep only the outputs whose descriptor is a SavedForBackwardsAOTOutput.",
        ),
        wrong(
            _sizes_with_nbytes,
            "tensor.nbytes needs concrete sizes, and a graph compiled with dynamic shapes has a "
            "symbolic one (the batch size): count the bytes as numel() * element_size(), which "
            "works on both.",
        ),
        wrong(
            _chooses_and_tags,
            "your choice is right, but you left marks on the graph you were handed "
            "(node.meta['should_offload']): a choice only looks, and whoever runs a pass next "
            "on that graph would read your marks. Build the set without changing the graph.",
        ),
        wrong(
            _chooses_placeholders,
            "you chose placeholders: a parameter (or the input) is saved for backward but lives "
            "on the device anyway, held by the module or the caller; moving a copy frees nothing.",
        ),
        wrong(
            _chooses_views,
            "you chose views (aten.t of a weight): a view shares its base's memory, so copying "
            "it frees nothing, and torch's pass refuses to offload views.",
        ),
        wrong(
            _chooses_small_values,
            "small tensors stay: a copy below min_bytes costs more in latency than it frees. "
            "Size a value from node.meta['val'].",
        ),
        wrong(
            _chooses_the_last_layer,
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


def _effective_users(node) -> list:
    """The nodes that read ``node``, a view's readers counted as readers of its base (torch's
    ``_find_all_effective_users``); the output node left out."""
    found = []
    for user in node.users:
        if user.op == "output":
            continue
        found.append(user)
        if getattr(user.target, "is_view", False):
            found += _effective_users(user)
    return found


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
    return list(_torch_refuses_once(model_name, partitioner, tuple(sorted(names))))


@functools.cache
def _torch_refuses_once(model_name, partitioner, names):
    from torch._functorch._activation_offloading import activation_offloading as ao
    from torch.utils._ordered_set import OrderedSet

    jd = _fresh_partition(model_name, partitioner)
    fw = jd.fw_module
    for node in fw.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in names
    static = OrderedSet([*cf.get_param_nodes(fw.graph), *cf.get_buffer_nodes(fw.graph)])
    ao.choose_offload_sets(fw, jd.num_fwd_outputs, static)
    return tuple(sorted(set(names) - {n.name for n in fw.graph.nodes if n.meta.get("saved_for_offloading")}))


def _offload_outcome(jd, x):
    """What the graphs look like after a pass, and what they compute."""
    fw, bw, k = jd.fw_module, jd.bw_module, jd.num_fwd_outputs
    returned = list(fw.graph.output_node().args[0])
    moved = {i: _origin(n) for i, n in enumerate(returned[k:]) if _is_copy(n)}
    held = {n.name: n for n in bw.graph.find_nodes(op="placeholder")}  # named as the forward's values
    direct = sorted(
        name for name in moved.values() if name in held and any(not _is_copy(u) for u in held[name].users)
    )
    reloaded = sorted(n.args[0].name for n in bw.graph.nodes if _is_copy(n) and n.args[0].op == "placeholder")
    try:
        for gm in (fw, bw):
            gm.graph.lint()
    except Exception as e:  # noqa: BLE001 - what lint says becomes the outcome
        return {"offloaded": sorted(moved.values()), "graphs lint": f"{type(e).__name__}"}
    graphs = {
        "offloaded": sorted(moved.values()),
        "graphs lint": True,
        "forward returns a reloaded copy": sorted(
            _origin(n) for n in returned[k:] if _is_copy(n) and _is_copy(n.args[0])
        ),
        "backward readers of the host copy, not the reloaded value": direct,
        "devices the backward's copies go to": sorted(
            {str(n.args[1]) for n in bw.graph.nodes if _is_copy(n)}
        ),
        "backward placeholders reloaded": reloaded,
        "forward's device peak, bytes by liveness": forward_device_peak(fw),
    }
    if x.device.type == "meta" or not jd.params:  # compiled or on meta: the graphs are all there is to see
        return graphs
    with _CountCopies() as fwd_copies:
        outs = fw(*jd.params.values(), *jd.buffers.values(), x)
    with _CountCopies() as bwd_copies:
        grads = bw(*outs[k:], *(2 * o for o in outs[:k]))[: len(jd.params)]  # loss: sum of squares
    return {
        **graphs,
        "copies run in forward": fwd_copies.copies,
        "copies run in backward": bwd_copies.copies,
        "output": outs[0],
        "gradients": list(grads),
    }


def _torchs_surgery_runs(call) -> bool:
    """Whether torch's offloading surgery (``offload_chosen_sets``, sync or async) ran during
    ``call()``: 9.6 asks for that surgery written by hand."""
    from torch._functorch._activation_offloading import activation_offloading as ao

    surgery = {ao.offload_chosen_sets.__code__, ao.offload_chosen_sets_async.__code__}
    ran, previous = [], sys.getprofile()

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in surgery:
            ran.append(True)

    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return bool(ran)


@_once_per_case
def _run_pass(answer, model_name, partitioner, last_layer, min_bytes):
    jd = _fresh_partition(model_name, partitioner)
    model, x = OFFLOAD_MODELS[model_name]()
    with handed(params=list(jd.params.values())):
        by_torch = _torchs_surgery_runs(
            lambda: answer(jd.fw_module, jd.bw_module, jd.num_fwd_outputs, last_layer, min_bytes)
        )
    outcome = {"torch's offload_chosen_sets did the surgery": by_torch, **_offload_outcome(jd, x)}
    outcome["torch's choose_offload_sets refuses"] = _torch_refuses(
        model_name, partitioner, outcome["offloaded"]
    )
    return outcome


def _copies_to_host(fw_module, num_fwd_outputs, chosen):
    """The forward half of 9.6, as most wrong answers below get it right: each chosen saved
    value copied to the host after its last reader, the forward returning the copy in its place.
    Returns ``[(k, node)]``: each moved value and its position among the saved values (the
    backward's placeholder for it has its name)."""
    order = {n: i for i, n in enumerate(fw_module.graph.nodes)}
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    moved = []
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name in chosen:
            with fw_module.graph.inserting_after(max(_effective_users(node), key=order.get, default=node)):
                returned[num_fwd_outputs + k] = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
            moved.append((k, node))
    out.args = (tuple(returned),)
    return moved


def _reload_before_every_reader(bw_module, moved):
    """The backward half, right: a copy back before the first reader, every reader rewired."""
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        with bw_module.graph.inserting_before(readers[0]):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        for reader in readers:
            reader.replace_input_with(held, reload)


def _offload_these(fw_module, bw_module, num_fwd_outputs, chosen):
    """Offload the saved values named in ``chosen``, right: the part the first four wrong
    answers below get right; what they get wrong is ``chosen``."""
    _reload_before_every_reader(bw_module, _copies_to_host(fw_module, num_fwd_outputs, chosen))
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_moving_placeholders(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the placeholders among the saved values moved too."""
    chosen = _chooses_placeholders(fw_module, last_layer, min_bytes)
    _offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_moving_views(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the views of the weights among the saved values moved too."""
    chosen = _chooses_views(fw_module, last_layer, min_bytes)
    _offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_moving_the_last_layer(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the last layer's activations moved too."""
    chosen = _chooses_the_last_layer(fw_module, last_layer, min_bytes)
    _offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_strictly_larger(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: only values larger than min_bytes moved (one of exactly min_bytes stays)."""
    chosen = choose_offload(fw_module, last_layer, min_bytes + 1)
    _offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_rewiring_one_reader(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: only the first backward node that reads a moved value reads the reload."""
    moved = _copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        first_reader = next(n for n in bw_module.graph.nodes if held in n.all_input_nodes)
        with bw_module.graph.inserting_before(first_reader):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        first_reader.replace_input_with(held, reload)  # the other readers still read held
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_reloading_in_forward(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the forward copies each value to the host and straight back, and returns the
    device copy; the backward is left as it was."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name not in chosen:
            continue
        with fw_module.graph.inserting_before(out):
            on_host = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
            returned[num_fwd_outputs + k] = fw_module.graph.call_function(
                DEVICE_PUT, (on_host, node.meta["val"].device)
            )
    out.args = (tuple(returned),)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_without_recompile(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: both graphs edited right, and neither module recompiled."""
    moved = _copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    _reload_before_every_reader(bw_module, moved)
    # and no gm.recompile(): the modules run the code generated before the edits


def _pass_reload_at_the_end(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: each reload made at the backward graph's insert point, its end, after its readers."""
    moved = _copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        # no inserting_before(readers[0]): the reload goes to the graph's end
        reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        for reader in readers:
            reader.replace_input_with(held, reload)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_reloading_to_the_cpu(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: every reload copies to the CPU, whatever device the value was on."""
    moved = _copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        with bw_module.graph.inserting_before(readers[0]):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, torch.device("cpu")))  # not the value's
        for reader in readers:
            reader.replace_input_with(held, reload)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_copying_at_the_end(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: every copy to the host made just before the forward's output node."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name not in chosen:
            continue
        with fw_module.graph.inserting_before(out):  # at the end: the value stays on the device to there
            returned[num_fwd_outputs + k] = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        with bw_module.graph.inserting_before(readers[0]):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        for reader in readers:
            reader.replace_input_with(held, reload)
    out.args = (tuple(returned),)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_calling_torchs_pass(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the values tagged, and torch's enable_activation_offloading left to do the surgery."""
    from torch._functorch._activation_offloading import activation_offloading as ao
    from torch.utils._ordered_set import OrderedSet

    chosen = choose_offload(fw_module, last_layer, min_bytes)
    for node in fw_module.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in chosen
    static = OrderedSet([*cf.get_param_nodes(fw_module.graph), *cf.get_buffer_nodes(fw_module.graph)])
    ao.enable_activation_offloading(fw_module, bw_module, num_fwd_outputs, static)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_matching_by_position(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: each saved value's backward placeholder found by its position, not its name (each
    offload right after its value, each reload right after the last placeholder)."""
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


def _pass_copying_after_each_value(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """A right answer written differently: the rules walked forward once (9.5's other right
    answer), each offload placed right after its value, each reload right after the last
    placeholder, the placeholder found by name, and the readers rewired one by one."""
    chosen = _choose_by_walking_forward(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    held_all = list(bw_module.graph.find_nodes(op="placeholder"))
    by_name = {n.name: n for n in held_all}
    new_args = []
    for position, node in enumerate(out.args[0]):
        if position < num_fwd_outputs or node.name not in chosen:
            new_args.append(node)
            continue
        with fw_module.graph.inserting_after(node):
            new_args.append(fw_module.graph.call_function(DEVICE_PUT, args=(node, torch.device("cpu"))))
        held = by_name[node.name]
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
        case(
            "lesson, on meta",
            "min_cut",
            "2",
            1024,
            label="the lesson's model traced on the meta device: the graphs are looked at, not run",
        ),
        case(
            "lesson",
            "compiled, dynamic",
            "2",
            1024,
            label="the lesson's model under torch.compile(dynamic=True): the batch size is saved last "
            "and read first, so positions do not line up (graphs looked at, not run)",
        ),
    ],
    wrong=[
        wrong(
            _pass_moving_placeholders,
            "you moved placeholders: the model's input (and, in a model with buffers, the buffers) "
            "is held by the caller or the module for the whole step, so a host copy frees nothing; "
            "torch's choose_offload_sets refuses them too. Offload computed activations only.",
        ),
        wrong(
            _pass_moving_views,
            "you moved the views of the weights (aten.t): their memory is the parameters', which "
            "stay on the device anyway, so the copy frees nothing. Leave views alone.",
        ),
        wrong(
            _pass_moving_the_last_layer,
            "you moved the last layer's activations: backward reads them first, right after forward "
            "ends, so no compute is left to hide their copies. Leave out what the last layer computes.",
        ),
        wrong(
            _pass_strictly_larger,
            "a value of exactly min_bytes is large enough to move: the rule is at least min_bytes.",
        ),
        wrong(
            _pass_rewiring_one_reader,
            "one backward node reads the reloaded value, but another still reads the host copy: "
            "when a saved value has several readers in the backward, every one of them must be "
            "rewired (replace_all_uses_with, keeping the reload's own input).",
        ),
        wrong(
            _pass_reloading_in_forward,
            "your forward copies each value to the host and straight back, and returns the device "
            "copy: the device holds it between forward and backward after all. The reload belongs "
            "in the backward graph, before the first node that reads the value.",
        ),
        wrong(
            _pass_without_recompile,
            "your graphs look right but never ran: a GraphModule keeps running the code generated "
            "when it was built until you call recompile() after changing its graph (see the "
            "copies run in forward and backward).",
        ),
        wrong(
            _pass_reloading_to_the_cpu,
            "your reloads copy to the CPU whatever device the value came from: on this CPU that "
            "looks right, but on a GPU the backward would compute on host memory (see the "
            "devices on the case traced on the meta device). Reload each value to its own "
            "device, node.meta['val'].device.",
        ),
        wrong(
            _pass_copying_at_the_end,
            "your copies to the host all sit at the end of the forward, so every moved value "
            "stays on the device to the last node: the forward's peak is what it was without "
            "offload (see the peak line). Copy each value right after its last reader in the "
            "forward (a view's readers count as its base's), where the device can free it.",
        ),
        wrong(
            _pass_calling_torchs_pass,
            "torch's enable_activation_offloading did the surgery: this exercise is that "
            "surgery, written by you. Insert the device_put nodes and rewire the readers yourself.",
        ),
        wrong(
            _pass_matching_by_position,
            "you found each saved value's backward placeholder by its position: in a graph compiled "
            "with dynamic shapes the forward returns its saved sizes last and the backward takes "
            "them first, so you reloaded other placeholders (see the compiled case). Find the "
            "placeholder by name, as torch's offload_chosen_sets does.",
        ),
        wrong(
            _pass_reload_at_the_end,
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
