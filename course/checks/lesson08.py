"""Checks for lesson 8, the capstone: a training step that fits a device-memory budget.

Each exercise is registered once, here: its reference solution (what
solutions/08_capstone.ipynb writes), an oracle that is not the solution, visible and hidden
cases, and the known wrong answers with their hints. See docs/authoring.md. The oracles:

- 8.1: course's ``Offloader``, whose counters were checked against torch's hooks in lesson 4;
- 8.2: torch's own 0/1 knapsack (``dp_knapsack``, which the min-cut partitioner can use);
- 8.3: the offload done by hand with torch's saved-tensor hooks, no ``Offloader``;
- 8.4 (a prediction): torch's min-cut partitioner on each block, then every subset.

The model the lesson and the checks share (``Block``, ``make_model``) and the lesson's numbers
(``LESSON_LAYER_BYTES``, ``LESSON_PARAM_BYTES``, ``LESSON_BUDGET``) are lesson content, in
course/content/lesson08.py, so the notebook measures exactly what the checks judge; the
other models of the hidden cases (``MODELS``) are here. Everything runs on the
CPU: "device memory" is what a GPU would hold; here we count bytes, we do not time copies.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
from collections import OrderedDict

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, handed, predict, wrong
from course.checks.solutions.lesson08 import (
    choose_offload,
    offloaded_step,
    predicted_plan,
    saved_bytes_per_layer,
)
from course.content.lesson08 import LESSON_BUDGET, LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, Block, make_model
from course.offload.offloader import Offloader, OffloadStats

# --- The models of 8.1's and 8.3's cases: the lesson's, and the hidden ones --------------


class SlicingBlock(Block):
    """A block that saves a view smaller than its storage: ``sin`` saves half of ``up(h)``."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(d, hidden)
        self.down = nn.Linear(hidden // 2, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = self.up(self.norm(x))[..., : self.down.in_features]  # a view of half the storage
        return x + self.down(half.sin())


def _sliced_model():
    torch.manual_seed(4)
    return nn.Sequential(OrderedDict(block0=Block(8, 16), block1=SlicingBlock(8, 32))), torch.randn(4, 8)


class ChunkBlock(Block):
    """A block that saves two views of one storage: ``sin`` saves the first half of ``up(h)``,
    ``cos`` the second, whose ``data_ptr()`` is not its storage's."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(d, hidden)
        self.down = nn.Linear(hidden // 2, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = self.up(self.norm(x)).chunk(2, dim=-1)  # two views, offsets 0 and hidden // 2
        return x + self.down(first.sin() * second.cos())


class TanhBlock(Block):
    """A block whose output two blocks save: its own ``tanh`` (which saves its result) and the
    next block's LayerNorm (which saves its input)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(super().forward(x))


def _chunked_model():
    torch.manual_seed(5)
    return nn.Sequential(OrderedDict(block0=Block(8, 24), block1=ChunkBlock(8, 32))), torch.randn(4, 8)


def _shared_output_model():
    torch.manual_seed(6)
    blocks = OrderedDict(block0=TanhBlock(8, 16), block1=Block(8, 40), block2=TanhBlock(8, 8))
    return nn.Sequential(blocks), torch.randn(3, 8)


#: name -> () -> (model, x); the programs exercises 8.1 and 8.3 run.
MODELS = {
    "lesson": make_model,
    "float64": lambda: make_model((24, 40), d=8, batch=(4,), dtype=torch.float64, seed=1),
    "3-d input": lambda: make_model((32, 8, 48), d=12, batch=(2, 5), seed=2),
    "six blocks": lambda: make_model((8, 72, 24, 56, 16, 40), d=8, batch=(6,), seed=3),
    "a saved slice": _sliced_model,
    "two views of one storage": _chunked_model,
    "a storage two blocks save": _shared_output_model,
}


# --- Exercise 8.1: saved bytes per block ----------------------------------------------------


def _oracle_per_layer(model, x):
    """course's Offloader copies each non-parameter storage once; read its counter per block."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    per_layer, handles = {}, []
    for name, block in model.named_children():
        handles.append(
            block.register_forward_pre_hook(
                lambda mod, args, name=name: per_layer.__setitem__(name, off.stats.offloaded_bytes)
            )
        )
        handles.append(
            block.register_forward_hook(
                lambda mod, args, out, name=name: per_layer.__setitem__(
                    name, off.stats.offloaded_bytes - per_layer[name]
                )
            )
        )
    try:
        with off:
            model(x)
    finally:
        for h in handles:
            h.remove()
    return per_layer


def _run_measure(answer, model_name):
    """The bytes per block, and how many module hooks the answer left on the learner's model
    (a measurement must leave the model as it found it: a forgotten forward pre-hook runs on
    every later step)."""
    model, x = MODELS[model_name]()
    with handed(model=model, x=x):  # a forward-only measurement leaves no .grad, no version bump
        per_layer = answer(model, x)
    left = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())
    return {"bytes per block": per_layer, "hooks left on the model": left}


def _is_param_memory(t) -> bool:
    """Whether ``t`` is a parameter or a view of one (``weight.t()``): its base is a leaf
    that requires grad."""
    base = t
    while base._base is not None:
        base = base._base
    return base.is_leaf and base.requires_grad


def _bytes_per_block(model, x, count):
    """What the wrong answers of 8.1 below share, the part they get right: forward pre-hooks
    say which block runs, one forward under saved-tensor hooks calls
    ``count(t, block, per_layer)`` for each saved tensor, and the hooks are removed after.
    Each answer's mistake is in its ``count``."""
    per_layer, current = {name: 0 for name, _ in model.named_children()}, [None]
    handles = [
        block.register_forward_pre_hook(lambda mod, args, name=name: current.__setitem__(0, name))
        for name, block in model.named_children()
    ]

    def pack(t):
        count(t, current[0], per_layer)
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        model(x)
    for h in handles:
        h.remove()
    return per_layer


def _every_save_counted(model, x):
    """BAD: every saved tensor counted, h = norm(x) twice (once for gate, once for up)."""

    def count(t, block, per_layer):
        if not _is_param_memory(t):
            per_layer[block] += t.nbytes  # no set of storages already counted

    return _bytes_per_block(model, x, count)


def _leaves_the_model_in_eval(model, x):
    """BAD: right bytes, measured in eval mode (no dropout), and the model left there."""
    model.eval()
    return saved_bytes_per_layer(model, x)


def _parameters_counted(model, x):
    """BAD: parameters (and weight.t(), a view of one) counted as activations."""
    seen = set()

    def count(t, block, per_layer):
        key = t.untyped_storage().data_ptr()
        if key not in seen:  # no test for a parameter's memory
            seen.add(key)
            per_layer[block] += t.untyped_storage().nbytes()

    return _bytes_per_block(model, x, count)


def _parameters_by_isinstance(model, x):
    """BAD: a parameter recognised by isinstance(t, nn.Parameter): weight.t() is a plain Tensor."""
    seen = set()

    def count(t, block, per_layer):
        key = t.untyped_storage().data_ptr()
        if not isinstance(t, nn.Parameter) and key not in seen:
            seen.add(key)
            per_layer[block] += t.untyped_storage().nbytes()

    return _bytes_per_block(model, x, count)


def _keyed_by_data_ptr(model, x):
    """BAD: storages told apart by t.data_ptr(), where a view's first element sits."""
    seen = set()

    def count(t, block, per_layer):
        key = t.data_ptr()  # the second half of a chunk has its own data_ptr, one storage
        if not _is_param_memory(t) and key not in seen:
            seen.add(key)
            per_layer[block] += t.untyped_storage().nbytes()

    return _bytes_per_block(model, x, count)


def _once_per_block(model, x):
    """BAD: one set of counted storages per block: a block's output the next block saves
    again is counted in both."""
    seen = set()

    def count(t, block, per_layer):
        key = (block, t.untyped_storage().data_ptr())  # the block in the key
        if not _is_param_memory(t) and key not in seen:
            seen.add(key)
            per_layer[block] += t.untyped_storage().nbytes()

    return _bytes_per_block(model, x, count)


def _view_bytes(model, x):
    """BAD: a saved view counted by its own elements (t.nbytes), not by the storage it keeps alive."""
    seen = set()

    def count(t, block, per_layer):
        key = t.untyped_storage().data_ptr()
        if not _is_param_memory(t) and key not in seen:
            seen.add(key)
            per_layer[block] += t.nbytes

    return _bytes_per_block(model, x, count)


def _running_totals(model, x):
    """BAD: each block's entry holds everything saved so far, not what the block saved."""
    seen, total = set(), [0]

    def count(t, block, per_layer):
        key = t.untyped_storage().data_ptr()
        if not _is_param_memory(t) and key not in seen:
            seen.add(key)
            total[0] += t.untyped_storage().nbytes()
            per_layer[block] = total[0]

    return _bytes_per_block(model, x, count)


def _hooks_left_on_the_model(model, x):
    """BAD: the right bytes, and the forward pre-hooks left registered on the caller's model."""
    per_layer, seen, current = {name: 0 for name, _ in model.named_children()}, set(), [None]
    for name, block in model.named_children():  # the handles are dropped: nothing removes the hooks
        block.register_forward_pre_hook(lambda mod, args, name=name: current.__setitem__(0, name))

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if not _is_param_memory(t) and key not in seen:
            seen.add(key)
            per_layer[current[0]] += t.untyped_storage().nbytes()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return per_layer


def _backward_while_measuring(model, x):
    """BAD: the reference measurement, then a backward through the caller's model."""
    per_layer = saved_bytes_per_layer(model, x)
    model(x).sum().backward()
    return per_layer


def _per_layer_by_param_storages(model, x):
    """A right answer written differently: parameters recognised by their storages, the
    current block kept by a pre-hook and a forward hook, hooks removed by an ExitStack."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    per_layer, seen, stack = dict.fromkeys(dict(model.named_children()), 0), set(), []

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in seen:
            seen.add(ptr)
            per_layer[stack[-1]] += t.untyped_storage().nbytes()
        return t

    with contextlib.ExitStack() as hooks:
        for name, block in model.named_children():
            pre = block.register_forward_pre_hook(lambda m, a, name=name: stack.append(name))
            post = block.register_forward_hook(lambda m, a, o: stack.__delitem__(-1))  # returns None
            hooks.callback(pre.remove)
            hooks.callback(post.remove)
        with saved_tensors_hooks(pack, lambda t: t):
            out = model(x)
    del out
    return per_layer


exercise(
    "8.1",
    name="saved_bytes_per_layer",
    title="Measure what each block saves for backward (each storage once, no parameters)",
    solution=saved_bytes_per_layer,
    oracle=_oracle_per_layer,
    run=_run_measure,
    points=2,
    partial=True,  # each case is its own program: k of n right earns k/n of the points
    cases=[case("lesson", label="the lesson's model: make_model(), x of shape (8, 16)")],
    hidden=[
        case("float64", label="two blocks in float64"),
        case("3-d input", label="three blocks on an input of shape (2, 5, 12)"),
        case("six blocks", label="six blocks of mixed widths"),
        case("a saved slice", label="a block whose sin saves half of a storage (a view)"),
        case("two views of one storage", label="a block that saves both halves of one storage (two views)"),
        case("a storage two blocks save", label="blocks whose tanh output the next block saves again"),
    ],
    wrong=[
        wrong(
            _every_save_counted,
            "h = norm(x) is saved twice (by gate and by up) but it is one storage: count each "
            "storage once (remember t.untyped_storage().data_ptr() in a set).",
        ),
        wrong(
            _parameters_counted,
            "you counted the parameters: LayerNorm's weight and bias and every Linear's "
            "weight.t() are saved too, but they live on the device anyway, so offloading them "
            "frees nothing. Skip a tensor whose base is a leaf that requires grad.",
        ),
        wrong(
            _parameters_by_isinstance,
            "addmm saves weight.t(), a view of the weight: a plain Tensor computed from a "
            "leaf, so neither an nn.Parameter test nor is_leaf on the view itself catches it. "
            "Walk to its base (t._base) and ask the base is_leaf and requires_grad.",
        ),
        wrong(
            _keyed_by_data_ptr,
            "t.data_ptr() is where a view's first element sits, not where its storage "
            "starts: the second half of a chunk has its own data_ptr but shares the storage. "
            "Remember t.untyped_storage().data_ptr() instead.",
        ),
        wrong(
            _once_per_block,
            "a block's output can be saved twice: by the block itself (tanh saves its result) "
            "and by the next block (LayerNorm saves its input). It is one storage: count it "
            "once, in the block that saved it first, with one set for the whole forward.",
        ),
        wrong(
            _view_bytes,
            "t.nbytes counts the view's own elements, but a saved view keeps its whole storage "
            "alive (a slice of half a tensor holds all of it): count the storage's bytes.",
        ),
        wrong(
            _backward_while_measuring,
            "a measurement of what forward saves runs forward only: your backward wrote .grad "
            "into the caller's model. Let the graph go (drop the output) instead of running it.",
        ),
        wrong(
            _leaves_the_model_in_eval,
            "the bytes are right, but the learner's model comes back in eval mode: every later "
            "training step would skip dropout and use batch norm's running statistics. A "
            "measurement leaves the model as it found it: remember model.training and restore "
            "it with model.train(was_training) before returning.",
        ),
        wrong(
            _running_totals,
            "these are running totals: each block's entry must hold only the bytes saved "
            "while that block ran, not everything saved so far.",
        ),
        wrong(
            _hooks_left_on_the_model,
            "the bytes are right, but your forward pre-hooks are still registered on the "
            "learner's model: they run on every later forward (and pile up with each call). "
            "Keep the handles that registering returns and remove them when you are done, "
            "even if the forward raises.",
        ),
    ],
    right=[_per_layer_by_param_storages],
    hint="three things decide a block's number: which block is running when a tensor is "
    "saved, whether that tensor's memory is a parameter's (it stays anyway), and whether its "
    "storage was already counted. And leave the model with no hooks of yours.",
)

# --- Exercise 8.2: choose what to offload under a budget ------------------------------------


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

# --- Exercise 8.3: apply the choice ---------------------------------------------------------


def _oracle_step(model, x, chosen):
    """What offloading the chosen blocks means, done by hand with torch's saved-tensor hooks
    (no Offloader): a forward pre-hook and a forward hook say which block is running; a
    tensor the chosen blocks save, unless its base is a parameter, goes to a host copy (its
    storage's bytes counted the first time that storage is seen) and is read back from the
    copy in backward (counted the first time each storage is read). The counts are handed
    back in the ``OffloadStats`` of an ``Offloader`` that never ran, the type the spec
    returns, so one ``run`` reads the answer and the oracle alike."""
    running, alive, out_bytes, back = [None], [], {}, set()

    def pack(t):
        base = t
        while base._base is not None:
            base = base._base
        if running[0] not in chosen or (base.is_leaf and base.requires_grad):
            return t, None
        storage = t.untyped_storage()
        alive.append(t)  # no address is reused while we count by address
        out_bytes.setdefault(storage.data_ptr(), storage.nbytes())
        return t.detach().to("cpu", copy=True), storage.data_ptr()  # the host copy

    def unpack(packed):
        t, key = packed
        if key is not None:
            back.add(key)
        return t

    def enter(name):
        return lambda module, args: running.__setitem__(0, name)

    handles = [
        h
        for name, block in model.named_children()
        for h in (
            block.register_forward_pre_hook(enter(name)),
            block.register_forward_hook(lambda module, args, out: running.__setitem__(0, None)),
        )
    ]
    try:
        with saved_tensors_hooks(pack, unpack):
            h = model(x)
            loss = h.pow(2).sum()  # outside every block: kept
    finally:
        for handle in handles:
            handle.remove()
    loss.backward()
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    off.stats = OffloadStats(d2h_bytes=sum(out_bytes.values()), h2d_bytes=sum(out_bytes[k] for k in back))
    return off


def _reference_grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    ref = copy.deepcopy(model)  # same weights, no hooks: torch alone
    return list(torch.autograd.grad(ref(x).pow(2).sum(), list(ref.parameters())))


@functools.cache
def _reference_grads_of(model_name: str) -> tuple[torch.Tensor, ...]:
    """torch's gradients for ``MODELS[model_name]`` (seeded: the same model every time), once
    per process: every case and every known wrong answer compares with them (a backward of
    these models takes about half a second on two cores)."""
    return tuple(_reference_grads(*MODELS[model_name]()))


def _run_step(answer, model_name, chosen):
    model, x = MODELS[model_name]()
    reference = _reference_grads_of(model_name)
    with handed(model=model, x=x):  # the step fills the model's .grad (its job: may_leave), nothing else
        off = answer(model, x, set(chosen))
    if not isinstance(off, Offloader):
        raise TypeError(f"offloaded_step should return the Offloader it used, not {type(off).__name__}")
    same = all(
        p.grad is not None and torch.allclose(p.grad, r, rtol=1e-5, atol=1e-6)
        for p, r in zip(model.parameters(), reference)
    )
    return {
        "gradients as without offload": same,
        "bytes copied to the host": off.stats.d2h_bytes,
        "bytes copied back": off.stats.h2d_bytes,
    }


def _step_offloads_every_block(model, x, chosen):
    """BAD: every block under the Offloader, chosen or not."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for _, block in model.named_children():
            h = block(h)  # no exclude() for the blocks that are not chosen
    h.pow(2).sum().backward()
    return off


def _step_inverted(model, x, chosen):
    """BAD: the chosen blocks excluded, the others offloaded."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with off.exclude() if name in chosen else contextlib.nullcontext():
                h = block(h)
    h.pow(2).sum().backward()
    return off


def _step_loss_inside(model, x, chosen):
    """BAD: the loss computed inside ``with off:``, so its saved input is offloaded too."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
        loss = h.pow(2).sum()
    loss.backward()
    return off


def _step_without_backward(model, x, chosen):
    """BAD: the forward only: nothing comes back, no gradient is made."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
    h.pow(2).sum()  # and no .backward()
    return off


def _left_entered(model, x, chosen):
    """BAD: the Offloader entered by hand and never exited: its hooks stay installed."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    off.__enter__()
    h = x
    for name, block in model.named_children():
        with contextlib.nullcontext() if name in chosen else off.exclude():
            h = block(h)
    with off.exclude():
        loss = h.pow(2).sum()
    loss.backward()
    return off


def _step_default_threshold(model, x, chosen):
    """BAD: Offloader's default min_bytes (1 MiB): every storage of these models stays put."""
    off = Offloader(device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
    h.pow(2).sum().backward()
    return off


def _step_offloader_per_block(model, x, chosen):
    """BAD: a new Offloader for each chosen block; the last one is returned."""
    off, h = Offloader(min_bytes=0, device_type="cpu", mode="copy"), x
    for name, block in model.named_children():
        if name in chosen:
            off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
            with off:
                h = block(h)
        else:
            h = block(h)
    h.pow(2).sum().backward()
    return off


def _step_hooks_pick_the_blocks(model, x, chosen):
    """BAD: forward pre-hooks toggle exclude() block by block, and stay on the model."""
    off, stack = Offloader(min_bytes=0, device_type="cpu", mode="copy"), contextlib.ExitStack()

    def before(name):
        return lambda module, args: None if name in chosen else stack.enter_context(off.exclude())

    for name, block in model.named_children():
        block.register_forward_pre_hook(before(name))
        block.register_forward_hook(lambda module, args, out: stack.close())
    with off:
        h = model(x)
    h.pow(2).sum().backward()
    return off


def _step_loss_excluded(model, x, chosen):
    """A right answer written differently: the loss inside `with off:`, but excluded."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    h = x
    with off:
        for name, block in model.named_children():
            if name in chosen:
                h = block(h)
            else:
                with off.exclude():
                    h = block(h)
        with off.exclude():
            loss = h.pow(2).sum()
    loss.backward()
    return off


exercise(
    "8.3",
    name="offloaded_step",
    title="Apply the choice: offload only the chosen blocks, same gradients",
    solution=offloaded_step,
    oracle=_oracle_step,
    run=_run_step,
    may_leave={"grad"},  # a training step's job: the model's .grad
    points=2,
    cases=[
        case("lesson", ["block0", "block3"], label="the lesson's model, chosen = {'block0', 'block3'}"),
        case("lesson", [], label="the lesson's model, chosen = set()"),
    ],
    hidden=[
        case("lesson", ["block2"], label="the lesson's model, chosen = {'block2'}"),
        case("six blocks", ["block1", "block4", "block5"], label="six blocks, three chosen"),
        case("3-d input", ["block0", "block1", "block2"], label="three blocks on a 3-d input, all chosen"),
    ],
    wrong=[
        wrong(
            _left_entered,
            "the Offloader was entered and never exited: its hooks stay on torch's "
            "saved-tensor-hooks stack, and every later forward in the notebook goes through "
            "them. Use it as a with block, which pops them on exit, even when the block raises.",
        ),
        wrong(
            _step_offloads_every_block,
            "every block was offloaded: the blocks that are not chosen must keep their "
            "saved tensors on the device (the Offloader can be told to look away).",
        ),
        wrong(
            _step_inverted,
            "inverted: the chosen blocks are the ones to offload; exclude() the others.",
        ),
        wrong(
            _step_loss_inside,
            "the loss was computed inside `with off:` and pow saved its input, the model's "
            "output, which was offloaded too. The hooks see everything saved in the block; "
            "compute the loss after it (or inside off.exclude()).",
        ),
        wrong(
            _step_default_threshold,
            "nothing was copied: the Offloader keeps every storage smaller than min_bytes, "
            "1 MiB unless you say otherwise, and every storage of these models is smaller. "
            "Offload everything the chosen blocks save: min_bytes=0.",
        ),
        wrong(
            _step_offloader_per_block,
            "the Offloader you returned counted only the last chosen block: each block had "
            "an Offloader of its own. One Offloader for the whole step, with exclude() for "
            "the blocks you keep, counts everything that moved.",
        ),
        wrong(
            _step_hooks_pick_the_blocks,
            "the bytes are right, but your forward hooks stay on the learner's model and run "
            "on every later forward. Choose the blocks in the loop that runs them (a with "
            "block per block), or remove the hooks' handles before you return.",
        ),
        wrong(
            _step_without_backward,
            "nothing came back and no gradient was made: the step is forward *and* backward; "
            "call .backward() on the loss before returning the Offloader.",
        ),
    ],
    right=[_step_loss_excluded],
    hint="the Offloader's hooks see every tensor saved while they are on, whoever saves it: "
    "decide block by block what they may take, keep everything else (the loss included) "
    "out of their reach, and remember the step ends with a backward pass.",
)

# --- Exercise 8.4: recompute, then move: the plan under Inductor's partitioner ---------------


def _not_param_bytes(fw_module) -> int:
    """Bytes of a partitioned forward's saved-for-backward values that are neither parameters
    nor views of them (each node's ``meta["val"]``)."""
    from course.aot.descriptors import ParamAOTInput, SavedForBackwardsAOTOutput, from_torch

    out = fw_module.graph.output_node()
    total = 0
    for node, desc in zip(out.args[0], out.meta["desc"]):
        if not isinstance(from_torch(desc), SavedForBackwardsAOTOutput):
            continue
        base = node
        while base.op == "call_function" and getattr(base.target, "is_view", False):
            base = base.args[0]  # t = aten.t(primals_3): follow the view to what it views
        if not (base.op == "placeholder" and isinstance(from_torch(base.meta["desc"]), ParamAOTInput)):
            total += node.meta["val"].numel() * node.meta["val"].element_size()
    return total


def _plan_under_min_cut():
    """The lesson's model partitioned by torch's ``min_cut_rematerialization_partition``
    (what Inductor uses), block by block: what each block's forward still saves besides
    parameters; then every subset of blocks to offload, the cheapest that fits the budget."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    model, x = make_model()
    saved, h = {}, x
    for name, block in model.named_children():
        fw = export_joint(block, (h,), partition_fn=min_cut_rematerialization_partition).fw_module
        saved[name] = _not_param_bytes(fw)  # the block's input counts: its LayerNorm saves it
        h = block(h).detach()
    must_shed = LESSON_PARAM_BYTES + sum(saved.values()) - LESSON_BUDGET
    subsets = [c for r in range(len(saved) + 1) for c in itertools.combinations(saved, r)]
    cheapest = min(
        (c for c in subsets if sum(saved[n] for n in c) >= must_shed), key=lambda c: sum(saved[n] for n in c)
    )
    return {
        "saved activation bytes": sum(saved.values()),
        "offload": sorted(cheapest),
        "bytes moved": 2 * sum(saved[n] for n in cheapest),
    }


_PLAN_KEYS = ("saved activation bytes", "offload", "bytes moved")


def _read_plan(answer):
    """A plan as ``_plan_under_min_cut`` returns it: the blocks to offload as a sorted list,
    however the learner wrote the collection (a set, a list, a tuple)."""
    if not isinstance(answer, dict):
        raise ValueError(f"write a dict with the keys {', '.join(map(repr, _PLAN_KEYS))}")
    plan = dict(answer)
    blocks = plan.get("offload")
    if isinstance(blocks, str) or not isinstance(blocks, (set, frozenset, list, tuple, type(None))):
        raise ValueError(
            "write the blocks to offload as a set of names, like {'blockN', ...} (set() for none)"
        )
    if blocks is not None:
        if not all(isinstance(b, str) for b in blocks):
            raise ValueError("name each block to offload as a string, like 'blockN'")
        plan["offload"] = sorted(blocks)
    return plan


# The catalogue writes each set of blocks as a list in block order (a set's repr, and so
# docs/exercises.md, would depend on the hash seed); _read_plan reads either the same way.
_EAGER_PLAN = {"saved activation bytes": 35072, "offload": ["block0", "block3"], "bytes moved": 28928}

predict(
    "8.4",
    name="predicted_plan",
    title="Predict the budget plan once the partitioner recomputes every GELU: what is saved, what moves, at what cost",
    truth=_plan_under_min_cut,
    solution=predicted_plan,
    parse=_read_plan,
    points=2,
    wrong=[
        wrong(
            _EAGER_PLAN,
            "that is eager's plan (and default_partition's): with the GELU outputs recomputed "
            "in backward, the forward no longer saves them, so each block hands backward "
            "fewer bytes, and the budget is short by less.",
        ),
        wrong(
            {**_EAGER_PLAN, "saved activation bytes": 27392},
            "the saved bytes are right, but the plan is eager's: with smaller blocks and a "
            "smaller gap to close, the cheapest set of blocks that covers it is another one. "
            "Work out the gap again (parameters + saved - budget) and try the subsets again.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block0", "block3"], "bytes moved": 22784},
            "block0 and block3 cover the gap, but they are no longer the cheapest choice: "
            "compare every subset's bytes with the new gap.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block1", "block3"], "bytes moved": 6784},
            "every offloaded byte crosses the link twice: to the host in forward and back in backward.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": set(), "bytes moved": 0},
            "recomputing shrinks the activations, but the parameters are still on the device: "
            "parameters plus what the forward saves must fit the budget, and they do not yet.",
        ),
        wrong(
            {"saved activation bytes": 19712, "offload": set(), "bytes moved": 0},
            "to recompute GELU's output in backward, the backward needs GELU's input, the "
            "gate's output: it stays saved (GELU's own backward needs it too). Only the "
            "output leaves the saved set.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block2"], "bytes moved": 26752},
            "largest-first again: block2 alone covers the gap but moves far more than "
            "needed. The cost is bytes over the link; try every subset.",
        ),
        wrong(
            {"saved activation bytes": 27392, "offload": ["block0"], "bytes moved": 14464},
            "one block is fewer copies, but the cost is bytes: a set of smaller blocks may "
            "cover the gap with fewer bytes than one larger block.",
        ),
    ],
    right=[
        {"offload": ["block3", "block1"], "bytes moved": 13568.0, "saved activation bytes": 27392},
        {"saved activation bytes": 27392, "offload": ("block1", "block3"), "bytes moved": 2 * 6784},
    ],
    hint="three steps, as a budget pass would take them: what the forward still saves once "
    "the GELU outputs are recomputed (each is a (batch, hidden) float32 tensor), how far "
    "parameters plus that are over the budget, and the cheapest set of blocks that covers "
    "the gap, each offloaded byte going out and coming back.",
)
