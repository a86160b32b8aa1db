"""Exercise 5.3, does a write to `mutated` change `saved`?: how a call is run and observed, the oracle,
the visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import torch

from course.checks import case, exercise, handed, wrong
from course.checks.solutions.lesson05 import same_saved_tensor
from course.content.lesson05 import VIEW_PAIRS


def _written_through(saved, mutated):
    """The oracle: write into ``mutated`` and see whether ``saved`` changed."""
    before = saved.clone()
    with torch.no_grad():
        mutated.fill_(-1.0)  # every base value is >= 0
    return not torch.equal(before, saved)


#: Hidden pairs over e = arange(20).reshape(4, 5): a storage of another size than b's.
_OTHER_SIZE_PAIRS = [("e[:, 4]", "e[3]"), ("e[:, 4]", "e[3, :4]")]


def _run_pair(answer, saved, mutated):
    b = torch.arange(12.0).reshape(3, 4)
    ns = {"b": b, "c": b.clone(), "e": torch.arange(20.0).reshape(4, 5)}
    if answer is _written_through:  # the oracle writes on purpose; it runs on its own copies
        return {"alias": bool(answer(eval(saved, ns), eval(mutated, ns))), "b and c untouched": True}
    with handed(b=b, c=ns["c"]):  # a probe that writes and puts back still bumps their versions
        alias = bool(answer(eval(saved, ns), eval(mutated, ns)))
    untouched = torch.equal(b, torch.arange(12.0).reshape(3, 4)) and torch.equal(ns["c"], b)
    return {"alias": alias, "b and c untouched": untouched}


def _first_element(saved, mutated):  # torch's rule
    return saved.data_ptr() == mutated.data_ptr()


def _same_storage(saved, mutated):
    return saved.untyped_storage().data_ptr() == mutated.untyped_storage().data_ptr()


def _byte_ranges(saved, mutated):
    if not _same_storage(saved, mutated):
        return False

    def span(t):
        last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        return t.storage_offset(), t.storage_offset() + last + 1

    (s0, s1), (m0, m1) = span(saved), span(mutated)
    return s0 < m1 and m0 < s1


def _equal_values(saved, mutated):
    return saved.shape == mutated.shape and torch.equal(saved, mutated)


def _same_object(saved, mutated):
    return saved is mutated


def _write_and_look(saved, mutated):
    """Answers the question by doing it: writes into the caller's tensor."""
    before = saved.clone()
    mutated.fill_(-1.0)
    return not torch.equal(before, saved)


def _same_saved_tensor_marks(saved, mutated):
    """A right answer written differently: mark mutated's elements in a scratch copy."""
    if saved.untyped_storage().data_ptr() != mutated.untyped_storage().data_ptr():
        return False
    n = saved.untyped_storage().nbytes() // saved.element_size()
    marks = torch.zeros(n, dtype=torch.bool)
    marks.as_strided(mutated.shape, mutated.stride(), mutated.storage_offset()).fill_(True)
    return bool(marks.as_strided(saved.shape, saved.stride(), saved.storage_offset()).any())


def _twelve_elements(saved, mutated):
    """BAD: the storage size written down from b (12 elements) instead of read from saved."""
    if saved.untyped_storage().data_ptr() != mutated.untyped_storage().data_ptr():
        return False

    def elements(t):
        return set(torch.arange(12).as_strided(t.shape, t.stride(), t.storage_offset()).flatten().tolist())

    return bool(elements(saved) & elements(mutated))


def _write_and_put_back(saved, mutated):
    """BAD: writes into the caller's tensor and puts the values back (their versions move on)."""
    before, kept = saved.clone(), mutated.clone()
    with torch.no_grad():
        mutated.add_(1.0)
        changed = not torch.equal(before, saved)
        mutated.copy_(kept)
    return changed


def _pair_case(saved, mutated, hidden=False):
    return case(saved, mutated, label=f"saved {saved}, mutated {mutated}" if hidden else None)


exercise(
    "5.3",
    name="same_saved_tensor",
    title="Does writing `mutated` change the saved tensor?",
    solution=same_saved_tensor,
    oracle=_written_through,
    run=_run_pair,
    points=3,
    cases=[_pair_case(s, m) for s, m in VIEW_PAIRS[:5]],
    hidden=[_pair_case(s, m, hidden=True) for s, m in VIEW_PAIRS[5:] + _OTHER_SIZE_PAIRS],
    wrong=[
        wrong(
            _twelve_elements,
            "the storage's size is written down from b (12 elements): another "
            "base has another size. Read it from the storage (its nbytes over the element size).",
        ),
        wrong(
            _write_and_put_back,
            "writing into the tensors and putting the values back still "
            "changes them: each write moves the version counter on, so a backward that saved "
            "them raises. Decide from storages, strides and offsets, without writing.",
        ),
        wrong(
            _first_element,
            "that is torch's test: data_ptr() is the address of a tensor's "
            "*first element*. b[1] starts 4 elements after b, so the two look unrelated "
            "although b[1] is part of b. Compare storages, then elements.",
        ),
        wrong(
            _same_storage,
            "same storage is necessary but not enough: b[0] and b[1] share "
            "a storage and no element, so a write to one leaves the other as it was "
            "(cloning there is safe but wastes memory).",
        ),
        wrong(
            _byte_ranges,
            "first-to-last ranges overlap for b[:, 0] and b[:, 1], but "
            "the columns interleave and share no element: compare the elements' storage "
            "offsets (hint: torch.arange(n).as_strided(t.shape, t.stride(), "
            "t.storage_offset())).",
        ),
        wrong(
            _equal_values,
            "aliasing is about memory, not values: c = b.clone() holds the same numbers in other memory.",
        ),
        wrong(
            _same_object,
            "a view is a new Python object over the same memory: b[1] is not b, but writing b[1] changes b.",
        ),
        wrong(
            _write_and_look,
            "right answers, found by writing into the caller's tensors: "
            "the question is asked *before* an op writes, about tensors backward still "
            "needs, so answering it must change nothing. Reason from storages, offsets and "
            "strides instead.",
        ),
    ],
    right=[_same_saved_tensor_marks],
    hint="two views of one tensor alias when they share a storage and at least one element of it: "
    "which storage elements does each tensor look at (offset, strides, shape)?",
)
