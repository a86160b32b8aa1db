"""Exercise 3.4, compress saved activations, within a byte budget: how a call is run and observed, the
oracle, the visible and hidden cases, and the known wrong answers (each with the hint it earns) and
right answers written differently.
"""

from __future__ import annotations

import contextlib
import weakref

import torch
from torch.utils.weak import WeakTensorKeyDictionary

from course.autograd.saved_tensors import saved_tensors_hooks
from course.autograd.version_check import checked_hooks
from course.checks import case, exercise, wrong
from course.checks.solutions.lesson03 import compress_hooks
from course.content.lesson03 import make_mlp, mlp_grads, packed_bytes


def _is_parameter(t) -> bool:
    base = t
    while base._base is not None:  # a view of a weight (W.t()) is the weight's memory
        base = base._base
    return base.is_leaf and base.requires_grad


def _grads_after_an_activation_changed(hooks, seed):
    """The MLP's gradients when the first activation is changed in place between forward and
    backward (relu saved it, and so did the next matmul): torch without hooks raises, and so
    must hooks that keep a copy of it (they must watch the activation, not their copy)."""
    x, Ws = make_mlp(seed)
    with saved_tensors_hooks(*hooks) if hooks is not None else contextlib.nullcontext():
        h1 = torch.relu(x @ Ws[0])
        loss = (torch.relu(h1 @ Ws[1]) @ Ws[2]).tanh().pow(2).mean()
    with torch.no_grad():
        h1.mul_(0.5)  # bumps the version of a tensor relu and the second matmul saved
    return torch.autograd.grad(loss, Ws)


def _run_compress(
    answer, seed, scale=1.0, dtype=torch.float32, step_early=False, transposed=False, activation_early=False
):
    names = ("W1.grad", "W2.grad", "W3.grad")
    if activation_early:
        return dict(zip(names, _grads_after_an_activation_changed(answer(), seed)))
    return dict(zip(names, mlp_grads(answer(), seed, scale, dtype, step_early, transposed)))


def _cost_compress(
    answer, seed, scale=1.0, dtype=torch.float32, step_early=False, transposed=False, activation_early=False
):
    return packed_bytes(answer(), seed, scale, dtype, transposed)  # the memory is the same either way


def _no_hooks():
    """The oracle of 3.4: torch by itself (no hooks), which saves exactly and checks versions."""
    return None


# The known wrong answers of 3.4 whose mistake is elsewhere share the solution's safety net:
# ``_stamp`` in pack, and ``_unpack_checked``, which refuses a tensor changed in place since and
# gives back the dtype that was saved.


def _stamp(t):
    return weakref.ref(t), t._version  # a weak reference keeps no memory


def _raise_if_changed(stamp) -> None:
    ref, version = stamp
    original = ref()
    if original is not None and original._version != version:
        raise RuntimeError("a saved tensor was changed in place after forward")


def _unpack_checked(packed):
    t, dtype, stamp = packed
    _raise_if_changed(stamp)
    return t if dtype is None else t.to(dtype)


def _version_of_its_copy():
    """Weights by reference and stamped; each activation compressed once, but the stamp is
    taken on the 16-bit copy, which nothing ever changes in place."""
    compressed = WeakTensorKeyDictionary()

    def pack_hook(t):
        if not t.is_floating_point() or _is_parameter(t):
            return t, None, _stamp(t)
        if t not in compressed:
            compressed[t] = t.to(torch.bfloat16)
        kept = compressed[t]
        return kept, t.dtype, _stamp(kept)  # BAD: the version of the copy, not of t

    return pack_hook, _unpack_checked


def _no_version_check():
    """Weights by reference, each activation compressed once, but no version stamp."""
    compressed = WeakTensorKeyDictionary()

    def pack_hook(t):
        if _is_parameter(t):
            return t, None
        if t not in compressed:
            compressed[t] = t.to(torch.bfloat16)
        return compressed[t], t.dtype  # BAD: nothing to tell a weight changed in place later

    def unpack_hook(packed):
        t, dtype = packed
        return t if dtype is None else t.to(dtype)

    return pack_hook, unpack_hook


def _copies_every_save():
    """A fresh 16-bit copy per pack, of weights and activations alike."""

    def pack_hook(t):
        return t.to(torch.bfloat16), t.dtype, _stamp(t)  # BAD: a weight too, and each save again

    return pack_hook, _unpack_checked


def _copies_each_save_of_an_activation():
    """Weights by reference, but a fresh copy per pack: relu's output, saved twice, twice."""

    def pack_hook(t):
        if _is_parameter(t):
            return t, None, _stamp(t)
        return t.to(torch.bfloat16), t.dtype, _stamp(t)  # BAD: no memory of what was compressed

    return pack_hook, _unpack_checked


def _compresses_the_weights():
    """Each saved tensor compressed once, the weights too."""
    compressed = WeakTensorKeyDictionary()

    def pack_hook(t):
        if t not in compressed:  # BAD: a weight gets a 16-bit copy beside the model's float32 one
            compressed[t] = t.to(torch.bfloat16)
        return compressed[t], t.dtype, _stamp(t)

    return pack_hook, _unpack_checked


def _unpacks_to_float32():
    """The solution's pack, but unpack always gives back float32."""
    compressed = WeakTensorKeyDictionary()

    def pack_hook(t):
        if _is_parameter(t):
            return t, _stamp(t)
        if t not in compressed:
            compressed[t] = t.to(torch.bfloat16)
        return compressed[t], _stamp(t)  # BAD: the original dtype is not remembered

    def unpack_hook(packed):
        t, stamp = packed
        _raise_if_changed(stamp)
        return t.float()

    return pack_hook, unpack_hook


def _float16_hooks():
    """Right, written differently: float16 instead of bfloat16."""
    compressed = WeakTensorKeyDictionary()

    def pack_hook(t):
        if _is_parameter(t):
            return t, None, _stamp(t)
        if t not in compressed:
            compressed[t] = t.to(torch.float16)
        return compressed[t], t.dtype, _stamp(t)

    return pack_hook, _unpack_checked


def _keeps_the_input_as_it_is():
    """Right, written differently: the input batch (it needs no grad) kept by reference too."""
    compressed = WeakTensorKeyDictionary()

    def pack_hook(t):
        if _is_parameter(t) or not t.requires_grad:
            return t, None, _stamp(t)
        if t not in compressed:
            compressed[t] = t.to(torch.bfloat16)
        return compressed[t], t.dtype, _stamp(t)

    return pack_hook, _unpack_checked


def _checked_by_the_course():
    """Right, written differently: the version check left to course's ``checked_hooks``."""
    return checked_hooks(*_no_version_check())


def _closure_cache_hooks():
    """Keeps float32 clones in a list of its own; the packed value is only an index."""
    kept = []

    def pack_hook(t):
        kept.append(t.clone())
        return len(kept) - 1

    return pack_hook, lambda i: kept[i]


def _identity_hooks():
    return (lambda t: t), (lambda p: p)


def _keep_both_hooks():
    # Keeps the original to remember its dtype: the original bytes stay alive.
    return (lambda t: (t.to(torch.bfloat16), t)), (lambda p: p[0].to(p[1].dtype))


def _pushes_its_hooks():
    pack, unpack = compress_hooks()
    torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)  # BAD: never popped
    return pack, unpack


def _int8_hooks():
    return (lambda t: t.to(torch.int8)), (lambda p: p.float())


def _no_cast_back_hooks():
    return (lambda t: t.to(torch.bfloat16)), (lambda p: p)


exercise(
    "3.4",
    name="compress_hooks",
    title="Compressing hooks: fewer saved bytes, nearly the same gradients",
    solution=compress_hooks,
    oracle=_no_hooks,
    run=_run_compress,
    cost=_cost_compress,
    budget={"saved bytes": 2600},
    rtol=2e-2,
    atol=3e-3,
    points=3,
    cases=[case(0, label="mlp_grads(compress_hooks(), seed=0)")],
    hidden=[
        case(1, label="another seed"),
        case(2, scale=3.0, label="inputs 3 times larger"),
        case(4, dtype=torch.float64, label="the same MLP in float64"),
        case(
            0,
            step_early=True,
            label="the last weight updated in place between forward and backward "
            "(torch without hooks raises RuntimeError)",
        ),
        case(5, transposed=True, label="weights stored (out, in) and used as W.t(): views of parameters"),
        case(
            3,
            activation_early=True,
            label="an activation changed in place between forward and backward "
            "(torch without hooks raises RuntimeError)",
        ),
    ],
    wrong=[
        wrong(
            _version_of_its_copy,
            "you stamp the version of your 16-bit copy, and nothing ever writes into that "
            "copy: when the activation itself is changed in place after forward, your unpack "
            "cannot see it. Stamp the tensor pack is handed (a weakref.ref(t) and t._version), "
            "and compare with that tensor in unpack.",
        ),
        wrong(
            _no_version_check,
            "the gradients and the memory are right, but a weight changed in place between "
            "forward and backward (an optimizer step taken too early) now gives a silently wrong "
            "gradient, where torch without hooks raises: under hooks torch does not compare "
            "versions. Record t._version (and a weakref.ref(t), which keeps no memory) in pack, "
            "and raise RuntimeError in unpack if the version moved.",
        ),
        wrong(
            _identity_hooks,
            "the gradients are right, but keeping every activation as it is holds all its "
            "bytes (4352 in the float32 MLP): store activations in a 16-bit floating dtype, and give the "
            "original dtype back when unpacking.",
        ),
        wrong(
            _copies_every_save,
            "a fresh 16-bit copy per pack holds more memory than saving nothing: the weights "
            "(which the model keeps anyway) get copies, and relu's output, saved twice (by "
            "relu and by the next matmul), is copied twice. Keep parameters by reference, "
            "and compress each activation once.",
        ),
        wrong(
            _copies_each_save_of_an_activation,
            "weights by reference: good. But relu's output is saved twice (by relu and by the "
            "next matmul), and each pack makes its own copy: two 16-bit copies cost as much "
            "as the float32 original. Remember what you already compressed (keyed by the "
            "tensor itself, weakly, so the memory can go).",
        ),
        wrong(
            _compresses_the_weights,
            "each activation once: good. But the weights are compressed too: the model keeps "
            "its float32 weights for the whole step, so a 16-bit copy is extra memory. Keep a "
            "parameter (a leaf that requires grad, or a view of one) by reference.",
        ),
        wrong(
            _unpacks_to_float32,
            "unpack must give back the dtype that was saved, not always float32: in the "
            "float64 MLP the matmul's backward refuses a float32 tensor next to float64 "
            "gradients. Remember the original dtype when packing.",
        ),
        wrong(
            _closure_cache_hooks,
            "the packed value is only a number, but the tensors it stands for are kept in a "
            "list of your own: that memory is held all the same (every pack's full float32 "
            "copy). Memory counts wherever it is kept; compress what you keep.",
        ),
        wrong(
            _keep_both_hooks,
            "keeping the original tensor next to its bfloat16 copy (to remember its dtype) "
            "keeps all its bytes alive, and more: remember the dtype, not the tensor.",
        ),
        wrong(
            _int8_hooks,
            "int8 holds whole numbers from -128 to 127: casting rounds every activation to an "
            "integer, so the gradients are wrong. Without a scale factor int8 is no "
            "compression of floats; a floating 16-bit dtype is.",
        ),
        wrong(
            _no_cast_back_hooks,
            "unpack must give back a tensor the backward formula can use: matmul's backward "
            "refuses a bfloat16 saved tensor next to a float32 gradient. Cast back in unpack.",
        ),
        wrong(
            _pushes_its_hooks,
            "your function pushes its hooks on torch's saved-tensor-hooks stack and never pops "
            "them: every later forward in the notebook runs them (one more pair per call). "
            "Return the pair; whoever uses it opens the with saved_tensors_hooks(...) block.",
        ),
    ],
    right=[_float16_hooks, _keeps_the_input_as_it_is, _checked_by_the_course],
    hint="three questions: which saved tensors does the step hold anyway (they cost nothing "
    "kept as they are)? which activation is saved more than once (compress it once)? and "
    "does unpack give back exactly the dtype that was saved?",
)
