"""Exercise 9.3, a policy that meets a memory budget with the least recompute: how a call is run and
observed, the oracle, the visible and hidden cases, and the known wrong answers (each with the hint
it earns) and right answers written differently.
"""

from __future__ import annotations

import itertools
import operator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    CheckpointPolicy,
)

from course.checks import case, exercise, handed, wrong
from course.checks.lesson09._shared import once_per_case, plans_with_a_backward
from course.checks.solutions.lesson09 import (
    budget_policy,
)
from course.content.lesson09 import (
    BUDGET,
    run_policy,
)

MATMULS = frozenset({"mm", "addmm", "bmm"})


def _products(fn, args, names=MATMULS, nbytes=lambda out: out.nbytes, inner=lambda a: a[-2].shape[-1]):
    """[(bytes of the result, FLOPs)] of every matrix product one forward of ``fn`` runs, in
    order; a wrong answer passes its own ``names`` of products, ``nbytes`` of a result or
    ``inner`` size of a product's arguments."""
    found = []

    class Profile(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kwargs=None):
            out = func(*a, **(kwargs or {}))
            if func.overloadpacket.__name__ in names:  # mm(a, b), addmm(c, a, b), bmm(a, b)
                found.append((nbytes(out), 2 * out.numel() * inner(a)))
            return out

    with torch.no_grad(), Profile():
        fn(*args)
    return found


def _by_position(keep, names=MATMULS):
    """A policy that saves the matrix products at positions ``keep`` (counted from 0, in
    forward order), and recomputes everything else. Torch asks a policy once per op, in
    forward only (the recomputation replays its answers by position; ``ctx.is_recompute`` is
    always False on torch 2.13), so one count serves."""
    met = itertools.count()  # matrix products met so far

    def policy(ctx, op, *args, **kwargs):
        if op.overloadpacket.__name__ not in names:
            return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if next(met) in keep else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _most_flops(products, budget, fits=operator.le):
    """The positions of the products that keep the most FLOPs (the fewest bytes among equals)
    with ``fits(bytes, budget)``: every subset tried."""
    subsets = (
        s for size in range(len(products) + 1) for s in itertools.combinations(range(len(products)), size)
    )
    fitting = (s for s in subsets if fits(sum(products[i][0] for i in s), budget))
    return set(max(fitting, key=lambda s: (sum(products[i][1] for i in s), -sum(products[i][0] for i in s))))


def _watched(leaves):
    return handed(parameters=list(leaves))  # a plan that runs backward fills their .grad


@once_per_case
def _run_budget(answer, name, budget):
    r = run_policy(("for", lambda fn, args: answer(fn, args, budget)), name, watch=_watched)
    return {"gradients": r["gradients"], "FLOPs rerun in backward": r["FLOPs rerun"]}


@once_per_case
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


def _strictly_under(fn, args, budget):
    """BAD: every subset tried, but only those that store strictly less than the budget."""
    return _by_position(_most_flops(_products(fn, args), budget, fits=operator.lt))


def _four_bytes_an_element(fn, args, budget):
    """BAD: a result's bytes counted as numel() * 4, whatever its dtype."""
    return _by_position(_most_flops(_products(fn, args, nbytes=lambda out: 4 * out.numel()), budget))


def _budget_of_the_lesson(fn, args, budget):
    """BAD: the budget the lesson's model runs under, not the one handed in."""
    return _by_position(_most_flops(_products(fn, args), BUDGET))


def _without_bmm(fn, args, budget):
    """BAD: mm and addmm profiled and answered for, bmm left out (never saved)."""
    names = frozenset({"mm", "addmm"})
    return _by_position(_most_flops(_products(fn, args, names=names), budget), names=names)


def _inner_from_the_second_argument(fn, args, budget):
    """BAD: the inner size read as a[1].shape[-1]: mat1's columns for addmm(bias, mat1, mat2),
    but mat2's columns (the result's) for mm(mat1, mat2) and bmm(mat1, mat2)."""
    return _by_position(_most_flops(_products(fn, args, inner=lambda a: a[1].shape[-1]), budget))


def _only_mm(fn, args, budget):
    """Keyed on aten.mm alone: nn.Linear's addmm never matches."""

    def policy(ctx, op, *a, **k):
        return (
            CheckpointPolicy.MUST_SAVE
            if op == torch.ops.aten.mm.default
            else CheckpointPolicy.PREFER_RECOMPUTE
        )

    return policy


def _storage_key(a):
    """Which product a call is: the storage of its last argument (each Linear's own weight)."""
    return a[-1].untyped_storage().data_ptr()


def _products_by_weight(fn, args):
    """{storage of the product's weight: (bytes of its result, FLOPs)}, from one forward."""
    sizes = {}

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kwargs=None):
            out = func(*a, **(kwargs or {}))
            if func in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
                sizes[_storage_key(a)] = (out.numel() * out.element_size(), 2 * out.numel() * a[-2].shape[-1])
            return out

    with torch.no_grad(), Seen():
        fn(*args)
    return sizes


def _saving_these(chosen):
    def policy(ctx, op, *a, **k):
        if op in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
            return _storage_key(a) in chosen  # True: save
        return False

    return policy


def _greedy_by_ratio(fn, args, budget):
    """BAD: the most FLOPs per byte first, each product kept if it still fits (a greedy
    knapsack, right only when every product costs the same FLOPs)."""
    sizes = _products_by_weight(fn, args)
    chosen, total = set(), 0
    for key, (nbytes, _flops) in sorted(sizes.items(), key=lambda kv: -kv[1][1] / kv[1][0]):
        if total + nbytes <= budget:
            chosen.add(key)
            total += nbytes
    return _saving_these(chosen)


def _table_over_bytes(fn, args, budget):
    """A right answer written differently: the knapsack solved by a table of the most FLOPs
    kept for each total of bytes (not every subset), and the decision keyed on the storage of
    the product's last argument, not on a count."""
    best = {0: (0, frozenset())}  # bytes stored -> (FLOPs kept, products kept)
    for key, (nbytes, flops) in _products_by_weight(fn, args).items():
        for used, (kept, chosen) in list(best.items()):
            if used + nbytes <= budget and best.get(used + nbytes, (-1,))[0] < kept + flops:
                best[used + nbytes] = (kept + flops, chosen | {key})
    _, chosen = max(best.values(), key=lambda v: v[0])
    return _saving_these(chosen)


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
        case(
            "widths 4-12-65-8, float16 input",
            BUDGET,
            label="Linears 4 -> 12 -> 65 -> 8 on 10 rows cast from float16: the middle product alone "
            "fills the budget exactly and keeps more FLOPs than the two others, the best per byte, together",
        ),
        case(
            "two blocks, float64",
            1024,
            label="two blocks in float64, budget 1024 bytes: three of the four products fill it exactly, "
            "at 8 bytes an element",
        ),
        case(
            "addmm, bmm and mm",
            1400,
            label="a Linear, a torch.bmm and an mm (inner sizes 8, 24 and 5; 24, 5 and 20 columns), "
            "budget 1400 bytes: not all three results fit",
        ),
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
            "some. Spend it on the matrix products (the ops with FLOPs to redo).",
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
            "each as costly to redo, would have used better. Choose the set of products that "
            "keeps the most FLOPs within the budget.",
        ),
        wrong(
            _strictly_under,
            "a choice that fills the budget exactly is allowed: the policy may store at most the "
            "budget, so a subset whose bytes add up to the budget itself fits. Check the "
            "comparison that decides whether a subset fits.",
        ),
        wrong(
            _greedy_by_ratio,
            "taking products one at a time by a rule (the most FLOPs per byte first, or the "
            "smallest first) is a greedy knapsack: a product is kept whole or not at all, so "
            "the best ratios first can leave bytes unused that one costlier product would fill "
            "better. Weigh every choice that fits (there are few products), or build a table of "
            "the most FLOPs kept for each total of bytes.",
        ),
        wrong(
            plans_with_a_backward,
            "your plan runs a backward while it profiles, and that backward writes .grad into the "
            "model's parameters (fn closes over them): a plan must leave the model as it found it. "
            "Profile one forward under torch.no_grad(), as the spec says.",
        ),
        wrong(
            _only_mm,
            "keyed on aten.mm alone: nn.Linear on a batch runs one aten.addmm (bias included), so "
            "your policy never saves a Linear's product. Count mm, addmm and bmm.",
        ),
        wrong(
            _without_bmm,
            "your policy never saves a batched product: torch.bmm (and @ between two 3-d tensors) "
            "runs aten.bmm, a matrix product per batch entry, as costly to redo as the others. "
            "Profile and answer for mm, addmm and bmm alike.",
        ),
        wrong(
            _inner_from_the_second_argument,
            "the FLOPs of a product are 2*m*k*n with k the size it sums over: the columns of its "
            "left factor, not of its result. For addmm(bias, m1, m2) the left factor comes second, "
            "after the bias; for mm(m1, m2) and bmm(m1, m2) it comes first. On a product whose "
            "inner size differs from its result's columns, your FLOPs are wrong.",
        ),
        wrong(
            _four_bytes_an_element,
            "a result's bytes depend on its dtype: numel times the element size (8 for float64, "
            "2 for float16), not numel times 4. In float64 your policy stores twice what it counted.",
        ),
        wrong(
            _budget_of_the_lesson,
            "your policy chose as if the budget were always the lesson's 2600 bytes: the hidden "
            "cases hand in other budgets. Choose within the budget your function is given.",
        ),
    ],
    right=[_table_over_bytes],
    cost_hint="your policy reruns the fewest FLOPs, but it stores more than the budget: count each "
    "saved result's bytes (numel times element size) and keep the total within it.",
    hint="profile one forward first (a TorchDispatchMode that records each matrix product's result "
    "bytes and FLOPs, 2*m*k*n), choose the products that keep the most FLOPs within the budget, then "
    "answer MUST_SAVE for those, counted in forward order (torch asks the policy once per op, in "
    "forward only).",
)
