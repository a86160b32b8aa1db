"""Exercise 8.1, saved bytes per block: how a call is run and observed, the oracle, the visible and
hidden cases, and the known wrong answers (each with the hint it earns) and right answers written
differently.
"""

from __future__ import annotations

import contextlib

from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, handed, wrong
from course.checks.lesson08._shared import MODELS
from course.checks.solutions.lesson08 import saved_bytes_per_layer
from course.offload.offloader import Offloader


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
