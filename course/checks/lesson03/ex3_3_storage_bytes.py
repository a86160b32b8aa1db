"""Exercise 3.3, the bytes a list of saved tensors keeps alive: how a call is run and observed, the
oracle, the visible and hidden cases, and the known wrong answers (each with the hint it earns) and
right answers written differently.
"""

from __future__ import annotations

import torch

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson03 import storage_bytes


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
