"""Checks for lesson 3, saved tensors: what ops save, pack / unpack hooks, memory, compression.

Each exercise is registered once, here: its reference solution (what
solutions/03_saved_tensors.ipynb writes), the oracle (torch, or course's reference
implementation run on torch's engine), visible and hidden cases, and the known wrong answers
with the hint each deserves. See docs/authoring.md.

The programs the checks run live here too, so the notebook can run exactly what the check
judges: ``retain_program`` (exercise 3.1), ``nested_program`` (exercise 3.2),
``saved_by_mlp`` (exercise 3.3), ``make_mlp`` / ``mlp_loss`` / ``mlp_grads`` (exercises 3.4
and 3.5), ``packed_bytes`` (the cost of 3.4) and ``run_on_disk`` (exercise 3.5).
"""

from __future__ import annotations

import gc
import itertools
import os
import tempfile

import torch

from course.checks import case, exercise, predict, wrong
from course.autograd.saved_tensors import saved_tensors_hooks

# --- Exercise 3.1: predict how often pack and unpack run -------------------------------------


def retain_program(hooks_cls=saved_tensors_hooks) -> dict:
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
    truth=retain_program,
    solution={"pack": 3, "unpack": 6},
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
    hint="list the tensors each node saves (exp: its result; mul: both inputs; sum: none), "
    "then remember that pack runs in forward and unpack in every backward that reads them.",
)

# --- Exercise 3.2: predict which hooks run when they nest -----------------------------------


def nested_program(hooks_cls=saved_tensors_hooks) -> dict:
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
    truth=nested_program,
    solution={"outer": (3, 3), "inner": (3, 3), "backward": (0, 0)},
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
    hint="list what each op saves and under which with-block it ran; the innermost active "
    "pair packs, and the pair that packed a value unpacks it.",
)

# --- Exercise 3.3: the bytes a list of saved tensors keeps alive ------------------------------


def storage_bytes(tensors):
    """Reference solution: bytes of memory the tensors keep alive, each storage counted once."""
    sizes = {}
    for t in tensors:
        storage = t.untyped_storage()  # a view shares its base's storage
        sizes[storage.data_ptr()] = storage.nbytes()  # the whole buffer stays alive
    return sum(sizes.values())


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


def _keyed_by_data_ptr(tensors):
    sizes = {}
    for t in tensors:
        sizes[t.data_ptr()] = t.untyped_storage().nbytes()
    return sum(sizes.values())


def _views_case():
    x = torch.zeros(4, 6)  # 24 float32: 96 bytes
    return [x, x[1:], x.t(), torch.zeros(5, dtype=torch.float64)]


def _slice_first_case():
    y = torch.zeros(10, dtype=torch.float16)  # 20 bytes
    return [y[2:5], y, y.view(2, 5), torch.arange(3)]  # int64: 24 bytes


def _same_object_case():
    z = torch.ones(2, 3)
    return [z, z, torch.zeros((), dtype=torch.bool), torch.empty(0)]


exercise(
    "3.3",
    name="storage_bytes",
    title="Bytes kept alive by saved tensors, each storage once",
    solution=storage_bytes,
    points=2,
    cases=[case(_views_case(), label="x = torch.zeros(4, 6); [x, x[1:], x.t(), torch.zeros(5, dtype=torch.float64)]")],
    hidden=[
        case(_slice_first_case(), label="a float16 slice listed before its base, and an int64 tensor"),
        case(_same_object_case(), label="the same tensor twice, a 0-d bool tensor and an empty tensor"),
        case(saved_by_mlp(), label="what an nn.Sequential MLP saves (saved_by_mlp())"),
        case([], label="no tensors at all"),
    ],
    wrong=[
        wrong(
            _per_tensor_storage,
            "views share their base's storage: x, x[1:] and x.t() are one buffer of memory. "
            "Count each storage once (key a dict by t.untyped_storage().data_ptr()).",
        ),
        wrong(
            _per_tensor_bytes,
            "t.numel() * t.element_size() is the view's size, and views are counted twice: "
            "count each storage once, and count all of it (t.untyped_storage().nbytes()).",
        ),
        wrong(
            _numel_per_storage,
            "numel() counts elements, not bytes: multiply by the element size, or better ask "
            "the storage for its nbytes().",
        ),
        wrong(
            _four_bytes_each,
            "not every tensor is float32: float16 takes 2 bytes an element, float64 and "
            "int64 take 8, bool 1 (t.element_size()); the storage's nbytes() knows.",
        ),
        wrong(
            _view_bytes_per_storage,
            "a slice keeps its whole base alive: saving y[2:5] keeps all of y's storage. "
            "Count the storage's nbytes(), not the bytes of the first view you meet.",
        ),
        wrong(
            _keyed_by_data_ptr,
            "t.data_ptr() is where the view starts: x[1:] starts 24 bytes into x's storage. "
            "Key by the storage (t.untyped_storage().data_ptr()), not by the view.",
        ),
    ],
    hint="for each tensor take t.untyped_storage(); keep one entry per storage (its "
    "data_ptr()) with its nbytes(); return the sum.",
)

# --- Exercise 3.4: compress saved activations, within a byte budget --------------------------


def make_mlp(seed: int, batch: int = 16, width: int = 32, scale: float = 1.0):
    """The inputs of exercises 3.4 and 3.5: x (no grad) and three weight matrices (leaves)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 8, generator=g) * scale
    shapes = [(8, width), (width, width), (width, 4)]
    Ws = [(torch.randn(*s, generator=g) / s[0] ** 0.5).requires_grad_() for s in shapes]
    return x, Ws


def mlp_loss(x, Ws):
    """relu(x @ W1) -> relu(. @ W2) -> tanh(. @ W3) -> squared mean."""
    h = x
    for W in Ws[:-1]:
        h = torch.relu(h @ W)  # (batch, width): saved twice, by relu and by the next matmul
    return (h @ Ws[-1]).tanh().pow(2).mean()


def mlp_grads(hooks, seed: int, scale: float = 1.0):
    """Gradients of the MLP's weights with ``hooks = (pack, unpack)`` around the forward."""
    pack, unpack = hooks
    x, Ws = make_mlp(seed, scale=scale)
    with saved_tensors_hooks(pack, unpack):
        loss = mlp_loss(x, Ws)
    return torch.autograd.grad(loss, Ws)


def exact_grads(seed: int, scale: float = 1.0):
    """The MLP's gradients with no hooks at all."""
    x, Ws = make_mlp(seed, scale=scale)
    return torch.autograd.grad(mlp_loss(x, Ws), Ws)  # no hooks: what torch saves by itself


def _tensors_in(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors_in(item)


def packed_bytes(hooks, seed: int, scale: float = 1.0) -> dict:
    """The cost of 3.4: bytes of the storages the packed values hold (each storage once)."""
    pack, unpack = hooks
    packed = []

    def keeping_pack(t):
        p = pack(t)
        packed.extend(_tensors_in(p))
        return p

    mlp_grads((keeping_pack, unpack), seed, scale)
    return {"saved bytes": storage_bytes(packed)}


def compress_hooks():
    """Reference solution: save floating tensors as bfloat16, give back their own dtype."""

    def pack_hook(t):
        if not t.is_floating_point():
            return t, None
        return t.to(torch.bfloat16), t.dtype  # half the bytes of float32

    def unpack_hook(packed):
        t, dtype = packed
        return t if dtype is None else t.to(dtype)

    return pack_hook, unpack_hook


def _run_compress(answer, seed, scale=1.0):
    return mlp_grads(answer(), seed, scale)


def _cost_compress(answer, seed, scale=1.0):
    return packed_bytes(answer(), seed, scale)


def exact_hooks():
    """The oracle of 3.4: hooks that keep each saved tensor as it is (torch's exact grads)."""
    return (lambda t: t.detach()), (lambda t: t)


def _fp16_hooks():
    return (lambda t: t.half()), (lambda p: p.float())


def _identity_hooks():
    return (lambda t: t), (lambda p: p)


def _keep_both_hooks():
    # Keeps the original to remember its dtype: the original bytes stay alive.
    return (lambda t: (t.to(torch.bfloat16), t)), (lambda p: p[0].to(p[1].dtype))


def _int8_hooks():
    return (lambda t: t.to(torch.int8)), (lambda p: p.float())


def _no_cast_back_hooks():
    return (lambda t: t.to(torch.bfloat16)), (lambda p: p)


exercise(
    "3.4",
    name="compress_hooks",
    title="Compressing hooks: fewer saved bytes, nearly the same gradients",
    solution=compress_hooks,
    oracle=exact_hooks,
    run=_run_compress,
    cost=_cost_compress,
    budget={"saved bytes": 7000},
    rtol=2e-2,
    atol=3e-3,
    points=3,
    cases=[case(0, label="mlp_grads(compress_hooks(), seed=0)")],
    hidden=[
        case(1, label="another seed"),
        case(2, scale=3.0, label="inputs 3 times larger"),
    ],
    wrong=[
        wrong(
            _identity_hooks,
            "the gradients are right, but saving float32 as is keeps every byte (9472 here). "
            "Pack a smaller dtype (torch.bfloat16 or torch.float16), unpack back to float32.",
        ),
        wrong(
            _keep_both_hooks,
            "keeping the original tensor next to its bfloat16 copy (to remember its dtype) "
            "keeps all its bytes alive, and more: remember t.dtype, not t.",
        ),
        wrong(
            _int8_hooks,
            "int8 holds whole numbers from -128 to 127: t.to(torch.int8) rounds every "
            "activation to an integer, so the gradients are wrong. Without a scale factor "
            "int8 is no compression of floats; a floating 16-bit dtype is.",
        ),
        wrong(
            _no_cast_back_hooks,
            "unpack must give back a tensor the backward formula can use: matmul's backward "
            "refuses a bfloat16 saved tensor next to a float32 gradient. Cast back in unpack.",
        ),
    ],
    hint="pack: t.to(torch.bfloat16) (and remember t.dtype beside it); unpack: cast back to "
    "that dtype. Return the pair of functions from compress_hooks().",
)

# --- Exercise 3.5: save to disk, clean up after ourselves ------------------------------------


def disk_hooks(directory):
    """Reference solution: one file per pack; the file goes when its handle is collected."""
    counter = itertools.count()

    class SelfDeletingTempFile:
        def __init__(self):
            self.name = os.path.join(directory, f"saved{next(counter)}.pt")

        def __del__(self):
            os.remove(self.name)  # the graph dropped the last reference to this handle

    def pack_hook(t):
        handle = SelfDeletingTempFile()
        torch.save(t.detach(), handle.name)
        return handle

    def unpack_hook(handle):
        return torch.load(handle.name)  # may run more than once: keep the file

    return pack_hook, unpack_hook


def run_on_disk(answer, seed: int) -> dict:
    """The program of exercise 3.5: two backward passes with ``answer(directory)``'s hooks."""
    with tempfile.TemporaryDirectory() as directory:
        pack, unpack = answer(directory)
        x, Ws = make_mlp(seed)
        with saved_tensors_hooks(pack, unpack):
            loss = mlp_loss(x, Ws)
        wrote = len(os.listdir(directory))
        first = torch.autograd.grad(loss, Ws, retain_graph=True)
        second = torch.autograd.grad(loss, Ws)  # frees the graph's saved values
        del loss, pack, unpack
        gc.collect()
        left = len(os.listdir(directory))
    exact = exact_grads(seed)  # torch, with no hooks
    return {
        "wrote files": wrote > 0,
        "grads right": all(torch.allclose(a, b) for a, b in zip(first, exact)),
        "grads right again": all(torch.allclose(a, b) for a, b in zip(second, exact)),
        "files left": left,
    }


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


exercise(
    "3.5",
    name="disk_hooks",
    title="Saved tensors on disk, files removed when the graph lets go",
    solution=disk_hooks,
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
            "nothing was written to the directory: pack must torch.save the tensor into a file "
            "there and return something small (the file's handle), not the tensor.",
        ),
    ],
    hint="pack: save t.detach() to a new file in directory and return a handle whose __del__ "
    "removes the file; unpack: torch.load(handle.name).",
)
