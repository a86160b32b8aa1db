"""Exercise 8.2, choose what to offload under a budget: how a call is run and observed, the oracle, the
visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import itertools

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson08 import choose_offload
from course.content.lesson08 import LESSON_BUDGET, LESSON_LAYER_BYTES, LESSON_PARAM_BYTES


def _judge_choice(answer, layer_bytes, param_bytes, budget):
    """What a choice does: the device bytes it leaves and the bytes it moves (down and back)."""
    chosen = answer(dict(layer_bytes), param_bytes, budget)
    names = list(chosen)
    unknown = [n for n in names if n not in layer_bytes]
    if unknown or len(set(names)) != len(names):
        raise ValueError(
            f"the choice must name each layer at most once, from {list(layer_bytes)}; got {names}"
        )
    offloaded = sum(layer_bytes[n] for n in set(names))
    return {
        "device bytes": param_bytes + sum(layer_bytes.values()) - offloaded,
        "bytes moved (to the host and back)": 2 * offloaded,
    }


def _over_budget(answer, layer_bytes, param_bytes, budget):
    try:
        device = _judge_choice(answer, layer_bytes, param_bytes, budget)["device bytes"]
    except ValueError:  # no choice fits (or an invalid one): correctness judges that
        return {"device bytes over budget": 0}
    return {"device bytes over budget": max(0, device - budget)}


def _oracle_choice(layer_bytes, param_bytes, budget):
    """torch's own 0/1 knapsack decides: ``dp_knapsack``, the dynamic program the min-cut
    partitioner can solve ``activation_memory_budget`` with, keeps the most activation bytes
    that fit beside the parameters; what it does not keep is offloaded.

    It quantizes ``memory * 10000`` to integers, so memory given in units of 10000 bytes is
    quantized to the exact byte counts: the choice is exact, not approximate.
    """
    from torch._functorch._activation_checkpointing.knapsack import dp_knapsack

    if param_bytes > budget:
        raise ValueError(f"the parameters alone ({param_bytes} bytes) exceed the budget ({budget})")
    names = list(layer_bytes)
    units = [layer_bytes[n] / 10_000 for n in names]  # bytes, in dp_knapsack's units
    values = [float(layer_bytes[n]) for n in names]  # the value of keeping a layer: its bytes
    _, kept, _ = dp_knapsack(units, values, (budget - param_bytes) / 10_000)
    return {n for i, n in enumerate(names) if i not in kept}


def _offload_everything(layer_bytes, param_bytes, budget):
    """BAD: every layer offloaded, whatever the budget needs."""
    return set(layer_bytes)


def _offload_in_order(names, layer_bytes, device, budget):
    """Take the layers ``names`` in that order until ``device`` bytes fit ``budget``: the
    greedy loop of the three wrong answers below (each picks its own order and ``device``)."""
    chosen = set()
    for name in names:
        if device <= budget:
            break
        chosen.add(name)
        device -= layer_bytes[name]
    return chosen


def _largest_first(layer_bytes, param_bytes, budget):
    """BAD: the largest layers first, until the rest fits (greedy, not the cheapest subset)."""
    if param_bytes > budget:
        raise ValueError("does not fit")
    largest_first = sorted(layer_bytes, key=lambda n: -layer_bytes[n])
    return _offload_in_order(largest_first, layer_bytes, param_bytes + sum(layer_bytes.values()), budget)


def _smallest_first(layer_bytes, param_bytes, budget):
    """BAD: the smallest layers first, until the rest fits."""
    if param_bytes > budget:
        raise ValueError("does not fit")
    smallest_first = sorted(layer_bytes, key=lambda n: layer_bytes[n])
    return _offload_in_order(smallest_first, layer_bytes, param_bytes + sum(layer_bytes.values()), budget)


def _largest_first_without_parameters(layer_bytes, param_bytes, budget):
    """BAD: largest first, and the device taken to hold the activations only."""
    largest_first = sorted(layer_bytes, key=lambda n: -layer_bytes[n])
    device = sum(layer_bytes.values())  # the parameters forgotten
    return _offload_in_order(largest_first, layer_bytes, device, budget)


def _strict(layer_bytes, param_bytes, budget):
    return choose_offload(layer_bytes, param_bytes, budget - 1)


def _all_if_impossible(layer_bytes, param_bytes, budget):
    try:
        return choose_offload(layer_bytes, param_bytes, budget)
    except ValueError:
        return set(layer_bytes)


def _fewest_layers_choice(layer_bytes, param_bytes, budget):
    """BAD: the fewest layers that fit (then the fewest bytes): one large layer beats two small ones."""
    if param_bytes > budget:
        raise ValueError("does not fit")
    total = param_bytes + sum(layer_bytes.values())
    subsets = [c for r in range(len(layer_bytes) + 1) for c in itertools.combinations(layer_bytes, r)]
    fitting = [c for c in subsets if total - sum(layer_bytes[n] for n in c) <= budget]
    return set(min(fitting, key=lambda c: (len(c), sum(layer_bytes[n] for n in c))))


def _none_if_nothing_moves(layer_bytes, param_bytes, budget):
    """BAD: None instead of the empty set when everything fits."""
    return choose_offload(layer_bytes, param_bytes, budget) or None


def _choose_by_bitmask(layer_bytes, param_bytes, budget):
    """A right answer written differently: subsets as bit masks, the cheapest kept by min()."""
    names = list(layer_bytes)
    if param_bytes > budget:
        raise ValueError("no choice fits: the parameters alone are over budget")
    keep_all = param_bytes + sum(layer_bytes.values())
    subsets = [[n for i, n in enumerate(names) if mask >> i & 1] for mask in range(2 ** len(names))]
    fitting = [c for c in subsets if keep_all - sum(layer_bytes[n] for n in c) <= budget]
    return set(min(fitting, key=lambda c: sum(layer_bytes[n] for n in c)))


_SIX = {"a": 4000, "b": 7000, "c": 2500, "d": 6000, "e": 1500, "f": 5000}

exercise(
    "8.2",
    name="choose_offload",
    title="Choose the layers to offload: fit the budget, move the fewest bytes",
    solution=choose_offload,
    oracle=_oracle_choice,
    run=_judge_choice,
    cost=_over_budget,
    budget={"device bytes over budget": 0},
    points=3,
    cases=[
        case(
            LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, LESSON_BUDGET, label="the lesson's model, budget 68 KiB"
        ),
        case(
            LESSON_LAYER_BYTES,
            LESSON_PARAM_BYTES,
            100_000,
            label="the lesson's model, budget 100000 (everything fits)",
        ),
    ],
    hidden=[
        case(
            LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, 69376, label="a budget that the best choice meets exactly"
        ),
        case(LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, 40_000, label="a budget smaller than the parameters"),
        case(_SIX, 10_000, 24_000, label="six layers, 10000 bytes of parameters, budget 24000"),
        case(_SIX, 10_000, 10_000, label="six layers, a budget that fits only the parameters"),
    ],
    wrong=[
        wrong(
            _offload_everything,
            "offloading everything fits any budget that fits the parameters, but every byte "
            "you offload crosses the link twice (to the host in forward, back in backward). "
            "Offload only as much as the budget requires.",
        ),
        wrong(
            _largest_first,
            "largest-first fits the budget but can move more than needed: with 14208 bytes to "
            "shed, block2 alone offloads 17472 bytes, block0 + block3 only 14464. This is a "
            "knapsack: with a handful of layers, try every subset (itertools.combinations).",
        ),
        wrong(
            _smallest_first,
            "smallest-first offloads many small layers and moves more than needed; look for "
            "the subset whose bytes are the least that still reach the amount you must shed.",
        ),
        wrong(
            _largest_first_without_parameters,
            "the parameters stay on the device: the device holds param_bytes plus the "
            "activations you keep, and that sum must be <= budget.",
        ),
        wrong(
            _fewest_layers_choice,
            "fewer layers is not fewer bytes: the cost of offloading is the bytes that cross "
            "the link, so two small layers that just cover the gap beat one large layer. "
            "Compare choices by the bytes they move.",
        ),
        wrong(
            _strict,
            "a device holding exactly budget bytes fits: the test is device bytes <= budget, not < budget.",
        ),
        wrong(
            _none_if_nothing_moves,
            "when everything fits, nothing has to move: the choice is the empty set. Return "
            "set(), not None: whoever applies the choice iterates over it.",
        ),
        wrong(
            _all_if_impossible,
            "when the parameters alone exceed the budget no choice fits: raise ValueError "
            "instead of returning a choice that breaks the budget.",
        ),
    ],
    right=[_choose_by_bitmask],
    hint="the device holds the parameters and every block you keep; the cost is what you "
    "offload. Among all the choices that fit, you want the cheapest, and when none can fit "
    "you say so with an error.",
)
