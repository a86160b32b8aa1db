"""Checks for lesson 8, the capstone: a training step that fits a device-memory budget.

Each exercise is registered once, here: its reference solution (what
solutions/08_capstone.ipynb writes), the oracle (course's ``Offloader``, whose counters were
checked against torch's hooks in lesson 4, or a brute force over every subset), visible and
hidden cases, and the known wrong answers with their hints. See docs/authoring.md.

The model the lesson and the checks share lives here too (``Block``, ``make_model``,
``MODELS``), so the notebook measures exactly what the checks judge. Everything runs on the
CPU: "device memory" is what a GPU would hold; here we count bytes, we do not time copies.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections import OrderedDict

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, handed, predict, wrong
from course.offload.offloader import Offloader

# --- the model of the lesson --------------------------------------------------------------


class Block(nn.Module):
    """A pre-norm gated-GELU MLP block with a residual: ``x + down(gelu(gate(h)) * up(h))``.

    ``h = norm(x)`` feeds two Linear layers, so both save the same activation ``h``: one
    storage, saved twice.
    """

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.gate = nn.Linear(d, hidden)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)  # (..., d)
        return x + self.down(nn.functional.gelu(self.gate(h)) * self.up(h))  # (..., d)


def make_model(hidden=(64, 16, 128, 32), d: int = 16, batch=(8,), dtype=torch.float32, seed: int = 0):
    """``(model, x)``: ``block0``, ``block1``, ... of widths ``hidden``, and an input batch."""
    torch.manual_seed(seed)
    blocks = OrderedDict((f"block{i}", Block(d, h)) for i, h in enumerate(hidden))
    model = nn.Sequential(blocks).to(dtype)
    return model, torch.randn(*batch, d, dtype=dtype)


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


#: name -> () -> (model, x); the programs exercises 8.1 and 8.3 run.
MODELS = {
    "lesson": make_model,
    "float64": lambda: make_model((24, 40), d=8, batch=(4,), dtype=torch.float64, seed=1),
    "3-d input": lambda: make_model((32, 8, 48), d=12, batch=(2, 5), seed=2),
    "six blocks": lambda: make_model((8, 72, 24, 56, 16, 40), d=8, batch=(6,), seed=3),
    "a saved slice": _sliced_model,
}


def _param_bytes(model: nn.Module) -> int:
    return sum(p.untyped_storage().nbytes() for p in model.parameters())


def _reference_grads(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    ref = copy.deepcopy(model)  # same weights, no hooks: torch alone
    return list(torch.autograd.grad(ref(x).pow(2).sum(), list(ref.parameters())))


# --- Exercise 8.1: saved bytes per block ----------------------------------------------------


def saved_bytes_per_layer(model, x):
    """Reference solution: bytes each block saves for backward, each storage once, no params."""
    per_layer = {name: 0 for name, _ in model.named_children()}
    seen = set()  # storages already counted
    current = [None]  # the block running now
    handles = [
        block.register_forward_pre_hook(lambda mod, args, name=name: current.__setitem__(0, name))
        for name, block in model.named_children()
    ]

    def pack(t):
        base = t
        while base._base is not None:  # addmm saves weight.t(): judge a view by its base
            base = base._base
        key = t.untyped_storage().data_ptr()
        if not (base.is_leaf and base.requires_grad) and key not in seen:
            seen.add(key)
            per_layer[current[0]] += t.untyped_storage().nbytes()
        return t

    try:
        with saved_tensors_hooks(pack, lambda t: t):
            out = model(x)  # the graph keeps every saved storage alive until we return
    finally:
        for h in handles:
            h.remove()
    del out
    return per_layer


def _oracle_per_layer(model, x):
    """course's Offloader copies each non-parameter storage once; read its counter per block."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    per_layer, handles = {}, []
    for name, block in model.named_children():
        handles.append(block.register_forward_pre_hook(
            lambda mod, args, name=name: per_layer.__setitem__(name, off.stats.offloaded_bytes)))
        handles.append(block.register_forward_hook(
            lambda mod, args, out, name=name: per_layer.__setitem__(
                name, off.stats.offloaded_bytes - per_layer[name])))
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


def _per_layer_variant(count_param, once_per_storage=True, cumulative=False, is_param=None, remove=True,
                       view_bytes=False):
    """The known wrong answers of 8.1, as variations of the same hook."""

    def measure(model, x):
        per_layer = {name: 0 for name, _ in model.named_children()}
        seen, current, total = set(), [None], [0]
        handles = [
            block.register_forward_pre_hook(lambda mod, args, name=name: current.__setitem__(0, name))
            for name, block in model.named_children()
        ]

        def pack(t):
            base = t
            while base._base is not None:
                base = base._base
            param = is_param(t) if is_param else (base.is_leaf and base.requires_grad)
            key = t.untyped_storage().data_ptr()
            if (count_param or not param) and (key not in seen or not once_per_storage):
                seen.add(key)
                nbytes = t.untyped_storage().nbytes() if once_per_storage and not view_bytes else t.nbytes
                total[0] += nbytes
                per_layer[current[0]] = total[0] if cumulative else per_layer[current[0]] + nbytes
            return t

        with saved_tensors_hooks(pack, lambda t: t):
            model(x)
        for h in handles if remove else ():
            h.remove()
        return per_layer

    return measure


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
    cases=[case("lesson", label="the lesson's model: make_model(), x of shape (8, 16)")],
    hidden=[
        case("float64", label="two blocks in float64"),
        case("3-d input", label="three blocks on an input of shape (2, 5, 12)"),
        case("six blocks", label="six blocks of mixed widths"),
        case("a saved slice", label="a block whose sin saves half of a storage (a view)"),
    ],
    wrong=[
        wrong(
            _per_layer_variant(count_param=False, once_per_storage=False),
            "h = norm(x) is saved twice (by gate and by up) but it is one storage: count each "
            "storage once (remember t.untyped_storage().data_ptr() in a set).",
        ),
        wrong(
            _per_layer_variant(count_param=True),
            "you counted the parameters: LayerNorm's weight and bias and every Linear's "
            "weight.t() are saved too, but they live on the device anyway, so offloading them "
            "frees nothing. Skip a tensor whose base is a leaf that requires grad.",
        ),
        wrong(
            _per_layer_variant(count_param=False, is_param=lambda t: isinstance(t, nn.Parameter)),
            "addmm saves weight.t(), a view: a plain Tensor, not an nn.Parameter, so the "
            "isinstance test lets it through. Walk to its base (t._base) and ask is_leaf and "
            "requires_grad.",
        ),
        wrong(
            _per_layer_variant(count_param=False, view_bytes=True),
            "t.nbytes counts the view's own elements, but a saved view keeps its whole storage "
            "alive (a slice of half a tensor holds all of it): count the storage's bytes.",
        ),
        wrong(
            _backward_while_measuring,
            "a measurement of what forward saves runs forward only: your backward wrote .grad "
            "into the caller's model. Let the graph go (drop the output) instead of running it.",
        ),
        wrong(
            _per_layer_variant(count_param=False, cumulative=True),
            "these are running totals: each block's entry must hold only the bytes saved "
            "while that block ran, not everything saved so far.",
        ),
        wrong(
            _per_layer_variant(count_param=False, remove=False),
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


def choose_offload(layer_bytes, param_bytes, budget):
    """Reference solution: the layers to offload so the device holds <= budget bytes,
    moving as few bytes as possible. Raises ValueError when no choice fits."""
    total = param_bytes + sum(layer_bytes.values())  # parameters never leave the device
    if param_bytes > budget:
        raise ValueError(f"the parameters alone ({param_bytes} bytes) exceed the budget ({budget})")
    best = None
    for r in range(len(layer_bytes) + 1):  # every subset: 2**n of them, fine for a few layers
        for chosen in itertools.combinations(layer_bytes, r):
            moved = sum(layer_bytes[n] for n in chosen)
            if total - moved <= budget and (best is None or moved < best[0]):
                best = (moved, set(chosen))
    return best[1]


def _judge_choice(answer, layer_bytes, param_bytes, budget):
    """What a choice does: the device bytes it leaves and the bytes it moves (down and back)."""
    chosen = answer(dict(layer_bytes), param_bytes, budget)
    names = list(chosen)
    unknown = [n for n in names if n not in layer_bytes]
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"the choice must name each layer at most once, from {list(layer_bytes)}; got {names}")
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


def _greedy(order, strict=False, count_params=True, raise_if_impossible=True):
    """Take layers in ``order`` until the rest fits (the known wrong answers of 8.2)."""

    def choose(layer_bytes, param_bytes, budget):
        if raise_if_impossible and count_params and param_bytes > budget:
            raise ValueError("does not fit")
        device = (param_bytes if count_params else 0) + sum(layer_bytes.values())
        chosen = set()
        for name in order(layer_bytes):
            if device < budget or (device == budget and not strict):
                break
            chosen.add(name)
            device -= layer_bytes[name]
        return chosen

    return choose


def _largest_first(layer_bytes):
    return sorted(layer_bytes, key=lambda n: -layer_bytes[n])


def _smallest_first(layer_bytes):
    return sorted(layer_bytes, key=lambda n: layer_bytes[n])


def _strict(layer_bytes, param_bytes, budget):
    return choose_offload(layer_bytes, param_bytes, budget - 1)


def _all_if_impossible(layer_bytes, param_bytes, budget):
    try:
        return choose_offload(layer_bytes, param_bytes, budget)
    except ValueError:
        return set(layer_bytes)


def _choose_by_bitmask(layer_bytes, param_bytes, budget):
    """A right answer written differently: subsets as bit masks, the cheapest kept by min()."""
    names = list(layer_bytes)
    if param_bytes > budget:
        raise ValueError("no choice fits: the parameters alone are over budget")
    keep_all = param_bytes + sum(layer_bytes.values())
    subsets = [[n for i, n in enumerate(names) if mask >> i & 1] for mask in range(2 ** len(names))]
    fitting = [c for c in subsets if keep_all - sum(layer_bytes[n] for n in c) <= budget]
    return set(min(fitting, key=lambda c: sum(layer_bytes[n] for n in c)))


#: The lesson's numbers: exercise 8.1's bytes for make_model(), and the parameter bytes.
LESSON_LAYER_BYTES = {"block0": 9280, "block1": 3136, "block2": 17472, "block3": 5184}
LESSON_PARAM_BYTES = 48768
LESSON_BUDGET = 68 * 1024  # bytes of device memory for parameters and saved activations

_SIX = {"a": 4000, "b": 7000, "c": 2500, "d": 6000, "e": 1500, "f": 5000}

exercise(
    "8.2",
    name="choose_offload",
    title="Choose the layers to offload: fit the budget, move the fewest bytes",
    solution=choose_offload,
    run=_judge_choice,
    cost=_over_budget,
    budget={"device bytes over budget": 0},
    points=3,
    cases=[
        case(LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, LESSON_BUDGET, label="the lesson's model, budget 68 KiB"),
        case(LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, 100_000, label="the lesson's model, budget 100000 (everything fits)"),
    ],
    hidden=[
        case(LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, 69376, label="a budget that the best choice meets exactly"),
        case(LESSON_LAYER_BYTES, LESSON_PARAM_BYTES, 40_000, label="a budget smaller than the parameters"),
        case(_SIX, 10_000, 24_000, label="six layers, 10000 bytes of parameters, budget 24000"),
        case(_SIX, 10_000, 10_000, label="six layers, a budget that fits only the parameters"),
    ],
    wrong=[
        wrong(
            lambda layer_bytes, param_bytes, budget: set(layer_bytes),
            "offloading everything fits any budget that fits the parameters, but every byte "
            "you offload crosses the link twice (to the host in forward, back in backward). "
            "Offload only as much as the budget requires.",
        ),
        wrong(
            _greedy(_largest_first),
            "largest-first fits the budget but can move more than needed: with 14208 bytes to "
            "shed, block2 alone offloads 17472 bytes, block0 + block3 only 14464. This is a "
            "knapsack: with a handful of layers, try every subset (itertools.combinations).",
        ),
        wrong(
            _greedy(_smallest_first),
            "smallest-first offloads many small layers and moves more than needed; look for "
            "the subset whose bytes are the least that still reach the amount you must shed.",
        ),
        wrong(
            _greedy(_largest_first, count_params=False, raise_if_impossible=False),
            "the parameters stay on the device: the device holds param_bytes plus the "
            "activations you keep, and that sum must be <= budget.",
        ),
        wrong(
            _strict,
            "a device holding exactly budget bytes fits: the test is device bytes <= budget, "
            "not < budget.",
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


def offloaded_step(model, x, chosen):
    """Reference solution: forward + backward of model(x).pow(2).sum(), copying to the host
    only what the blocks in ``chosen`` save; returns the Offloader (its stats say what moved)."""
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")  # on a GPU: "cuda", "stream"
    h = x
    with off:
        for name, block in model.named_children():
            with contextlib.nullcontext() if name in chosen else off.exclude():
                h = block(h)
    h.pow(2).sum().backward()  # the loss saves h: outside the hooks, it stays put
    return off


def _run_step(answer, model_name, chosen):
    model, x = MODELS[model_name]()
    reference = _reference_grads(model, x)
    with handed(x=x):  # the step fills the model's .grad (that is its job), but must not change x
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


def _step_variant(offload_all=False, invert=False, loss_inside=False, backward=True):
    def step(model, x, chosen):
        off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
        h = x
        with off:
            for name, block in model.named_children():
                keep = (name not in chosen) != invert and not offload_all
                with off.exclude() if keep else contextlib.nullcontext():
                    h = block(h)
            loss = h.pow(2).sum() if loss_inside else None
        if loss is None:
            loss = h.pow(2).sum()
        if backward:
            loss.backward()
        return off

    return step


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
    run=_run_step,
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
            _step_variant(offload_all=True),
            "every block was offloaded: the blocks that are not chosen must keep their "
            "saved tensors on the device (the Offloader can be told to look away).",
        ),
        wrong(
            _step_variant(invert=True),
            "inverted: the chosen blocks are the ones to offload; exclude() the others.",
        ),
        wrong(
            _step_variant(loss_inside=True),
            "the loss was computed inside `with off:` and pow saved its input, the model's "
            "output, which was offloaded too. The hooks see everything saved in the block; "
            "compute the loss after it (or inside off.exclude()).",
        ),
        wrong(
            _step_variant(backward=False),
            "nothing came back and no gradient was made: the step is forward *and* backward; "
            "call .backward() on the loss before returning the Offloader.",
        ),
    ],
    right=[_step_loss_excluded],
    hint="the Offloader's hooks see every tensor saved while they are on, whoever saves it: "
    "decide block by block what they may take, keep everything else (the loss included) "
    "out of their reach, and remember the step ends with a backward pass.",
)

# --- Exercise 8.4: predict what the joint graph saves ---------------------------------------


def _param_saves_in_joint():
    """How many SavedForBackwardsAOTOutput values of the partitioned forward are parameters
    or views of parameters (course.aot.joint, torch's default partitioner)."""
    from course.aot.descriptors import ParamAOTInput, SavedForBackwardsAOTOutput, from_torch
    from course.aot.joint import export_joint

    model, x = make_model()
    fw = export_joint(model, (x,)).fw_module.graph
    out = fw.output_node()
    count = 0
    for node, desc in zip(out.args[0], out.meta["desc"]):
        if not isinstance(from_torch(desc), SavedForBackwardsAOTOutput):
            continue
        while node.op == "call_function" and getattr(node.target, "is_view", False):
            node = node.args[0]  # t = aten.t(primals_3): follow the view to what it views
        count += node.op == "placeholder" and isinstance(from_torch(node.meta["desc"]), ParamAOTInput)
    return count


predict(
    "8.4",
    name="predicted_param_saves",
    title="Predict: how many saved-for-backward values of the joint graph are parameters (or views of them)?",
    truth=_param_saves_in_joint,
    solution=20,
    wrong=[
        wrong(
            32,
            "not every parameter is needed by backward: a bias's gradient is the sum of the "
            "output's gradient, and a Linear's weight is needed only as weight.t(). Count the "
            "parameter saves in the pack trace of one block (a parameter's shape is its "
            "giveaway), then scale to four blocks.",
        ),
        wrong(
            8,
            "that counts LayerNorm's weight and bias (2 per block), but each of the three "
            "Linear layers also saves weight.t(), a view of its weight: 5 per block.",
        ),
        wrong(
            12,
            "that counts the weight.t() of the three Linear layers, but LayerNorm's backward "
            "needs its weight and bias too: 5 per block.",
        ),
        wrong(
            5,
            "that is one block; the model has four.",
        ),
        wrong(
            0,
            "the partitioned forward returns whatever backward needs, parameters included: "
            "backward is a separate graph and gets its inputs only from the forward's outputs "
            "(and the tangents).",
        ),
    ],
    right=[20.0],
    hint="count, in the pack trace of block3 above, the saved tensors that are parameters or "
    "views of them (LayerNorm's weight and bias are (16,), a Linear's weight.t() is its "
    "weight transposed), then multiply by the number of blocks.",
)
