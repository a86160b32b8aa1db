"""Checks for lesson 3, saved tensors: what ops save, pack / unpack hooks, memory, compression.

Each exercise is registered once, here: its reference solution (what
solutions/03_saved_tensors.ipynb writes), the oracle (torch, or course's reference
implementation run on torch's engine), visible and hidden cases, and the known wrong answers
with the hint each deserves. See docs/authoring.md.

The programs the checks run are lesson content, in ``course/content/lesson03.py``, so the
notebook imports and runs exactly what the check judges: ``make_mlp`` / ``mlp_loss`` /
``mlp_grads`` (exercises 3.4 and 3.5), ``packed_bytes`` (the cost of 3.4) and ``MemoryWatch``
(what 3.5's "tensors still in memory" counts). Here stay what judges: ``run_on_disk`` (how a
case of 3.5 runs an answer), the truths of the predictions (``_retain_program`` of 3.1,
``_nested_program`` of 3.2, private: the notebook writes the program out after the check and
never imports what would answer it), the cases, and the known wrong answers, each written out
as a learner would write it, its mistake in its own body.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import tempfile
import weakref

import torch
import torch._dynamo  # noqa: F401  torch.save imports it on its first call (3-6 s): paid here, not in a timed case of 3.5
from torch.utils.weak import WeakTensorKeyDictionary

from course.autograd.saved_tensors import saved_tensors_hooks
from course.autograd.version_check import checked_hooks
from course.checks import case, exercise, predict, wrong
from course.checks.solutions.lesson03 import (
    compress_hooks,
    disk_hooks,
    predicted_calls,
    predicted_nesting,
    storage_bytes,
)
from course.content.lesson03 import MemoryWatch, exact_grads, make_mlp, mlp_grads, mlp_loss, packed_bytes

# --- Exercise 3.1: predict how often pack and unpack run -------------------------------------


def _retain_program(hooks_cls=saved_tensors_hooks) -> dict:
    """The program of exercise 3.1: count the hook calls (torch's or course's context manager)."""
    calls = {"pack": 0, "unpack": 0}

    def pack(t):
        calls["pack"] += 1
        return t.detach()

    def unpack(t):
        calls["unpack"] += 1
        return t

    x = torch.ones(3, requires_grad=True)
    with hooks_cls(pack, unpack):
        y = x.exp()  # ExpBackward0 saves its result, y
        z = (y * x).sum()  # MulBackward0 saves y and x; SumBackward0 saves only a size
    z.backward(retain_graph=True)
    z.backward()
    return calls


predict(
    "3.1",
    name="predicted_calls",
    title="Predict how many times pack and unpack run",
    truth=_retain_program,
    solution=predicted_calls,
    points=1,
    wrong=[
        wrong(
            {"pack": 3, "unpack": 3},
            "pack runs once per saving, in forward; but unpack runs every time backward reads "
            "the saved value: each of the two backward passes reads all three.",
        ),
        wrong(
            {"pack": 6, "unpack": 6},
            "pack runs in forward only, when the op saves; backward passes unpack what is "
            "already packed. Two backward passes do not pack again.",
        ),
        wrong(
            {"pack": 2, "unpack": 4},
            "count savings, not tensors: ExpBackward0 saves its result y, and MulBackward0 "
            "saves y again (and x). The same tensor saved by two nodes is packed twice.",
        ),
        wrong(
            {"pack": 4, "unpack": 8},
            "SumBackward0 saves no tensor, only the input's size (its backward expands the "
            "gradient to that size).",
        ),
        wrong(
            RuntimeError,
            "retain_graph=True keeps the saved tensors after the first backward, so the "
            "second one runs (and unpacks again).",
        ),
    ],
    right=[{"unpack": 6, "pack": 3}, {"pack": 3.0, "unpack": 6.0}],
    hint="list the tensors each node saves (exp: its result; mul: both inputs; sum: none), "
    "then remember that pack runs in forward and unpack in every backward that reads them.",
)

# --- Exercise 3.2: predict which hooks run when they nest -----------------------------------


def _nested_program(hooks_cls=saved_tensors_hooks) -> dict:
    """The program of exercise 3.2: (packs, unpacks) of each of three pairs of hooks."""
    calls = {name: [0, 0] for name in ("outer", "inner", "backward")}

    def hooks(name):
        def pack(t):
            calls[name][0] += 1
            return t.detach()

        def unpack(t):
            calls[name][1] += 1
            return t

        return hooks_cls(pack, unpack)

    x = torch.ones(2, requires_grad=True)
    with hooks("outer"):
        a = x.exp()  # saves a
        with hooks("inner"):
            b = a * x  # saves a and x
            c = b.sin()  # saves b
        d = c * c  # saves c, twice
    with hooks("backward"):
        d.sum().backward()  # runs no op that saves (no create_graph)
    return {name: tuple(counts) for name, counts in calls.items()}


predict(
    "3.2",
    name="predicted_nesting",
    title="Predict which hooks run when they nest",
    truth=_nested_program,
    solution=predicted_nesting,
    points=1,
    wrong=[
        wrong(
            {"outer": (6, 6), "inner": (3, 3), "backward": (0, 0)},
            "hooks do not chain: inside the inner block only the inner pair runs, the outer "
            "pack does not run as well.",
        ),
        wrong(
            {"outer": (6, 6), "inner": (0, 0), "backward": (0, 0)},
            "the innermost pair wins, not the outermost: a with-block pushes its pair on top "
            "of a stack, and only the top pair is called.",
        ),
        wrong(
            {"outer": (3, 0), "inner": (3, 0), "backward": (0, 6)},
            "a saved value is unpacked by the unpack hook of the pair that packed it (stored "
            "with it), whatever pair is active when backward runs.",
        ),
        wrong(
            {"outer": (2, 2), "inner": (3, 3), "backward": (0, 0)},
            "c * c saves c twice, as self and as other: two savings, two packs.",
        ),
    ],
    right=[{"backward": [0, 0], "inner": [3, 3], "outer": [3, 3]}],
    hint="list what each op saves and under which with-block it ran; the innermost active "
    "pair packs, and the pair that packed a value unpacks it.",
)

# --- Exercise 3.3: the bytes a list of saved tensors keeps alive ------------------------------


def _bytes_covered(tensors):
    """The oracle of 3.3, by brute force: how many distinct byte addresses the tensors'
    storages cover (the union of the intervals [start, start + nbytes)), with no notion of
    "the same storage" at all. Two live storages never overlap, so this is their total."""
    covered, total = [], 0
    for start, end in sorted(
        {(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in (t.untyped_storage() for t in tensors)}
    ):
        if covered and start < covered[-1][1]:  # overlaps the previous interval: extend it
            covered[-1][1] = max(covered[-1][1], end)
        else:
            covered.append([start, end])
    for start, end in covered:
        total += end - start
    return total


def saved_by_mlp(batch: int = 4, seed: int = 0) -> list[torch.Tensor]:
    """What a small nn.Sequential MLP saves for backward, in pack order (detached)."""
    torch.manual_seed(seed)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    saved = []

    def pack(t):
        saved.append(t.detach())  # shares t's storage
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        mlp(torch.randn(batch, 8)).pow(2).mean()
    return saved


def _per_tensor_storage(tensors):
    return sum(t.untyped_storage().nbytes() for t in tensors)


def _per_tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _numel_per_storage(tensors):
    sizes = {}
    for t in tensors:
        sizes[t.untyped_storage().data_ptr()] = t.numel()
    return sum(sizes.values())


def _four_bytes_each(tensors):
    sizes = {}
    for t in tensors:
        sizes[t.untyped_storage().data_ptr()] = t.numel() * 4
    return sum(sizes.values())


def _view_bytes_per_storage(tensors):
    sizes = {}
    for t in tensors:
        sizes.setdefault(t.untyped_storage().data_ptr(), t.numel() * t.element_size())
    return sum(sizes.values())


def _largest_view_per_storage(tensors):
    sizes = {}
    for t in tensors:
        key = t.untyped_storage().data_ptr()
        sizes[key] = max(sizes.get(key, 0), t.numel() * t.element_size())
    return sum(sizes.values())


def _keyed_by_data_ptr(tensors):
    sizes = {}
    for t in tensors:
        sizes[t.data_ptr()] = t.untyped_storage().nbytes()
    return sum(sizes.values())


def _keyed_by_id(tensors):
    sizes = {}
    for t in tensors:
        sizes[id(t)] = t.untyped_storage().nbytes()
    return sum(sizes.values())


def _storage_bytes_comprehension(tensors):  # a right answer, written differently
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


def _storage_bytes_seen_set(tensors):  # another right answer: a set of storages already counted
    seen, total = set(), 0
    for t in tensors:
        s = t.untyped_storage()
        if s.data_ptr() not in seen:
            seen.add(s.data_ptr())
            total += s.nbytes()
    return total


def _views_case():
    x = torch.zeros(4, 6)  # 24 float32: 96 bytes
    return [x, x[1:], x.t(), torch.zeros(5, dtype=torch.float64)]


def _slice_first_case():
    y = torch.zeros(10, dtype=torch.float16)  # 20 bytes
    return [y[2:5], y, y.view(2, 5), torch.arange(3)]  # int64: 24 bytes


def _slices_without_base_case():
    w = torch.arange(12.0)  # 48 bytes; only two slices of it are in the list
    return [w[2:6], w[5:], torch.ones(3, dtype=torch.float64)[1:]]  # and 24 bytes, of which 16 viewed


def _expanded_case():
    b = torch.arange(3.0)  # 12 bytes, seen as 1000 rows by a stride-0 view
    return [b.expand(1000, 3), b.detach()]


def _same_object_case():
    z = torch.ones(2, 3)
    return [z, z, torch.zeros((), dtype=torch.bool), torch.empty(0)]


exercise(
    "3.3",
    name="storage_bytes",
    title="Bytes kept alive by saved tensors, each storage once",
    solution=storage_bytes,
    oracle=_bytes_covered,
    points=2,
    partial=True,  # each case is its own program: k of n right earns k/n of the points
    cases=[
        case(
            _views_case(),
            label="x = torch.zeros(4, 6); [x, x[1:], x.t(), torch.zeros(5, dtype=torch.float64)]",
        )
    ],
    hidden=[
        case(_slice_first_case(), label="a float16 slice listed before its base, and an int64 tensor"),
        case(
            _slices_without_base_case(),
            label="two slices of a 12-float tensor that is not in the list, and a slice of a float64 tensor",
        ),
        case(_same_object_case(), label="the same tensor twice, a 0-d bool tensor and an empty tensor"),
        case(
            _expanded_case(),
            label="b.expand(1000, 3) of a 3-float b, and b.detach(): a view bigger than its storage",
        ),
        case(saved_by_mlp(), label="what an nn.Sequential MLP saves (saved_by_mlp())"),
        case([], label="no tensors at all"),
    ],
    wrong=[
        wrong(
            _per_tensor_storage,
            "views share their base's storage: x, x[1:] and x.t() are one buffer of memory, "
            "and it is freed only once. Count each storage once, not each tensor.",
        ),
        wrong(
            _per_tensor_bytes,
            "numel() * element_size() is the size of the view, not of the memory it keeps: "
            "views are counted twice and a slice's unseen part is missed. Think in storages.",
        ),
        wrong(
            _numel_per_storage,
            "numel() counts elements, not bytes: an element of float64 takes 8 bytes, of "
            "float16 2, of bool 1.",
        ),
        wrong(
            _four_bytes_each,
            "not every tensor is float32: float16 takes 2 bytes an element, float64 and "
            "int64 take 8, bool 1; the storage itself knows its size in bytes.",
        ),
        wrong(
            _view_bytes_per_storage,
            "a slice keeps its whole base alive: saving y[2:5] keeps all of y's storage. "
            "Count the storage's size, not the bytes of the first view you meet.",
        ),
        wrong(
            _largest_view_per_storage,
            "the largest view is not the storage: when only slices of a tensor are saved "
            "(w[2:6] and w[5:] of a 12-element w), all 12 elements stay in memory. Ask the "
            "storage for its size.",
        ),
        wrong(
            _keyed_by_data_ptr,
            "t.data_ptr() is where the view starts: x[1:] starts 24 bytes into x's storage, "
            "so it looks like other memory. Identify the storage, not the view.",
        ),
        wrong(
            _keyed_by_id,
            "id(t) names the Python object, not the memory: x[1:] and x are two objects over "
            "one buffer. Identify the storage (where it starts), not the tensor object.",
        ),
    ],
    right=[_storage_bytes_comprehension, _storage_bytes_seen_set],
    hint="memory belongs to storages, not to tensors: a view shares its base's storage and "
    "keeps all of it alive. Which distinct buffers does the list keep, and how big is each?",
)

# --- Exercise 3.4: compress saved activations, within a byte budget --------------------------


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

# --- Exercise 3.5: save to disk, clean up after ourselves ------------------------------------


def run_on_disk(answer, seed: int) -> dict:
    """The program of exercise 3.5: two backward passes with ``answer(directory)``'s hooks.

    Besides the files and the gradients it observes memory: after the forward pass, how many
    storages that pack was handed or made are still alive (weights and the input batch
    aside). Hooks that really moved the activations to disk leave none.
    """
    if answer is _torch_and_the_spec:
        return _torch_and_the_spec(seed)
    with tempfile.TemporaryDirectory() as directory:
        pack, unpack = answer(directory)
        x, Ws = make_mlp(seed)
        memory = MemoryWatch((x, *Ws))
        with saved_tensors_hooks(memory.wrap(pack), unpack):
            loss = mlp_loss(x, Ws)
        alive, _ = memory.alive()
        wrote = len(os.listdir(directory))
        first = torch.autograd.grad(loss, Ws, retain_graph=True)
        second = torch.autograd.grad(loss, Ws)  # frees the graph's saved values
        del loss, pack, unpack, memory
        gc.collect(1)  # young objects only: what the step made (a full collection is slow)
        left = len(os.listdir(directory))
    return _on_disk(wrote, alive, first, second, left)


def _on_disk(wrote, alive, first, second, left) -> dict:
    return {
        "files after forward (one per pack)": wrote,
        "tensors still in memory after forward": alive,
        "gradients, first backward": first,
        "gradients, second backward": second,
        "files left": left,
    }


def _torch_and_the_spec(seed: int) -> dict:
    """The oracle of 3.5: the gradients are torch's with no hooks at all, the files one per
    save that torch makes (counted by torch's own saved_tensors_hooks), and the spec's two
    zeros: no activation left in memory after forward, no file left once the graph is gone.
    ``run_on_disk`` hands the seed straight here."""
    x, Ws = make_mlp(seed)
    saves = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saves.append(1) or t.detach(), lambda t: t):
        mlp_loss(x, Ws)
    exact = exact_grads(seed)
    return _on_disk(len(saves), 0, exact, exact, 0)


def _paths_never_deleted(directory):
    counter = itertools.count()

    def pack_hook(t):
        name = os.path.join(directory, f"saved{next(counter)}.pt")
        torch.save(t.detach(), name)
        return name

    return pack_hook, torch.load


def _deleted_in_unpack(directory):
    counter = itertools.count()

    def pack_hook(t):
        name = os.path.join(directory, f"saved{next(counter)}.pt")
        torch.save(t.detach(), name)
        return name

    def unpack_hook(name):
        t = torch.load(name)
        os.remove(name)
        return t

    return pack_hook, unpack_hook


def _kept_in_memory(directory):
    return (lambda t: t.detach()), (lambda t: t)


def _file_and_memory(directory):
    """Writes each file, but keeps the tensor on the handle and unpacks that."""
    counter = itertools.count()

    class Handle:
        def __init__(self, t):
            self.name = os.path.join(directory, f"saved{next(counter)}.pt")
            self.tensor = t

        def __del__(self):
            os.remove(self.name)

    def pack_hook(t):
        handle = Handle(t.detach())
        torch.save(handle.tensor, handle.name)
        return handle

    return pack_hook, lambda handle: handle.tensor


def _disk_hooks_finalize(directory):  # a right answer: weakref.finalize instead of __del__
    import uuid
    import weakref

    class Handle:
        pass

    def pack_hook(t):
        handle = Handle()
        handle.path = os.path.join(directory, f"{uuid.uuid4().hex}.pt")
        torch.save(t.detach(), handle.path)
        weakref.finalize(handle, os.remove, handle.path)
        return handle

    return pack_hook, lambda handle: torch.load(handle.path)


exercise(
    "3.5",
    name="disk_hooks",
    title="Saved tensors on disk, files removed when the graph lets go",
    solution=disk_hooks,
    oracle=_torch_and_the_spec,
    run=run_on_disk,
    points=2,
    cases=[case(0, label="run_on_disk(disk_hooks, seed=0)")],
    hidden=[case(3, label="another seed")],
    wrong=[
        wrong(
            _paths_never_deleted,
            "the gradients are right but the files stay: nothing removes them. Return a "
            "handle object whose __del__ (or a weakref.finalize) removes the file; the graph "
            "drops the handle when it frees its saved values.",
        ),
        wrong(
            _deleted_in_unpack,
            "unpack may run more than once: the second backward (retain_graph=True before it) "
            "reads the same saved tensors again, and the file is gone. Delete when the handle "
            "is garbage-collected, not in unpack.",
        ),
        wrong(
            _kept_in_memory,
            "nothing was written to the directory: pack must write the tensor into a file "
            "there and return something small that names the file, not the tensor.",
        ),
        wrong(
            _file_and_memory,
            "the files are written, but the handle still holds the tensor, so every activation "
            "stays in memory and unpack never reads the disk: nothing was saved. The handle "
            "must hold only the file's name; unpack reads the file.",
        ),
    ],
    right=[_disk_hooks_finalize],
    hint="the packed value is all the graph keeps: it must be small (no tensor in it), name a "
    "file that holds the tensor, and remove that file when the graph lets go of it (and not "
    "before: unpack may run more than once).",
)
