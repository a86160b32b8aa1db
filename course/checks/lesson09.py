"""Checks for lesson 9: memory policies, recompute or offload, with saved-tensor hooks.

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

The model, the programs and the measurements the lesson and the checks share (``make_model``,
``PROGRAMS``, ``run_policy``, ``BUDGET``) are lesson
content, in course/content/lesson09.py, so the notebook shows exactly what the checks judge.
Two of 9.3's known wrong answers, ``save_every_product`` and ``in_forward_order``, are also
rows of the notebook's table of policies; they stay here, with the answers.
"""

from __future__ import annotations

import copy
import functools
import gc
import itertools

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    set_checkpoint_early_stop,
)

from course.checks import case, exercise, get, handed, predict, wrong
from course.checks.solutions.lesson09 import (
    budget_policy,
    predicted_reruns,
    recompute_hooks,
)
from course.content.lesson09 import (
    BUDGET,
    PROGRAMS,
    OpCounter,
    backward_counts,
    plain_backward_counts,
    run_policy,
)

# --- Speed: what the checks trace once --------------------------------------------------
#
# A failing check runs every known wrong answer on every case to find the hint. To keep that
# within seconds, the outcome of a known answer of ours, which leaves nothing behind and never
# changes, is computed once per case.


@functools.cache
def _known_answers() -> tuple:
    """Our own answers to 9.1 and 9.3 (solution, oracle, wrong and right ones) that leave
    nothing behind: their outcomes are kept per case."""
    found = []
    for exercise_id in ("9.1", "9.3"):
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
