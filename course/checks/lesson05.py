"""Checks for lesson 5, mutating saved tensors: allow_mutation_on_saved_tensors.

Each exercise is registered once, here: its reference solution (what
solutions/05_mutation.ipynb writes), the oracle, visible and hidden cases, and the known
wrong answers with the hint each deserves. See docs/authoring.md. The pairs of views and
the writes the notebook's tables show (``VIEW_PAIRS``, ``SAVED_X_WRITES``) are lesson
content, in course/content/lesson05.py.

- 5.1 (predict): which saved tensors of a program get cloned. Truth: course's context,
  read after the program ran (``ctx.original`` / ``ctx.cloned``).
- 5.2: a clone-before-mutate TorchDispatchMode for one op, ``mul_``. Oracle: the same clones
  seen one layer up, by a TorchFunctionMode (``Tensor.mul_`` and the ``aten.mul_`` overloads).
  The programs use every op's result (a mode that drops it is seen) and write a copy of the
  watched tensor with equal values (a mode matching by value is seen).
- 5.3: ``same_saved_tensor(saved, mutated)``, the aliasing test torch gets wrong. Oracle:
  write into ``mutated`` and look whether ``saved`` changed; an answer must not write.
- 5.4 (predict): which of six writes (through detach() and .data, a version bump, a clone,
  out= into another tensor, under no_grad) make the context clone a saved x. Truth: each
  write run inside course's context, the clones counted.
"""

from __future__ import annotations

import numpy
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from course.autograd.graph import increment_version
from course.autograd.mutation import allow_mutation_on_saved_tensors
from course.checks import case, exercise, handed, predict, wrong
from course.checks.solutions.lesson05 import (
    CloneBeforeMul,
    predicted_clones,
    predicted_write_clones,
    same_saved_tensor,
)
from course.content.lesson05 import SAVED_X_WRITES, VIEW_PAIRS

# --- Exercise 5.1: predict which saved tensors get cloned ---------------------------------

#: The program of exercise 5.1: forward lines (what gets saved), then the writes.
CLONE_PROGRAM_FORWARD = [
    "w = torch.randn(2, 3, requires_grad=True)",
    "b, c, e = w.clone(), w.clone(), w.clone()",
    "p = b * c            # MulBackward0 saves b and c",
    "q = e[0].exp()       # ExpBackward0 saves its result q",
    "e1 = e[1]",
    "s = e1 ** 2          # PowBackward0 saves e1, the view e[1]",
]
CLONE_PROGRAM_WRITES = [
    "b.add_(1)",
    "c[1].mul_(2)",
    "e[0].zero_()",
]
CLONE_PROGRAM_NAMES = ("b", "c", "q", "e1")


def _clone_state(
    forward=CLONE_PROGRAM_FORWARD,
    writes=CLONE_PROGRAM_WRITES,
    names=CLONE_PROGRAM_NAMES,
    context=allow_mutation_on_saved_tensors,
) -> dict:
    """Run ``forward`` then ``writes`` (lines of Python) inside ``context``; return
    ``{name: "cloned" | "original"}`` for each saved tensor named in ``names``.

    A handle is matched to its name after the forward lines (``ctx.original[h] is ns[name]``),
    so this works for torch's context too, whose handles carry no index.
    """
    torch.manual_seed(0)
    ns = {"torch": torch}
    with context() as ctx:
        for line in forward:
            exec(line, ns)
        name_of = {h: n for h, t in list(ctx.original.items()) for n in names if t is ns[n]}
        for line in writes:
            exec(line, ns)
        state = {name_of[h]: "cloned" for h in list(ctx.cloned.keys())}
        state.update({name_of[h]: "original" for h in list(ctx.original.keys())})
    return {n: state[n] for n in names}


_RIGHT_CLONES = {"b": "cloned", "c": "cloned", "q": "original", "e1": "original"}


def _read_clone_states(answer):
    """5.1's prediction with spacing and capitals forgotten: {" B": "Cloned"} reads as
    {"b": "cloned"}; anything but a dict is left as it is (and judged as it is)."""
    if not isinstance(answer, dict):
        return answer
    return {str(k).strip(): v.strip().lower() if isinstance(v, str) else v for k, v in answer.items()}


predict(
    "5.1",
    name="predicted_clones",
    title="Predict which saved tensors the context clones",
    truth=_clone_state,
    solution=predicted_clones,
    points=2,
    wrong=[
        wrong(
            {**_RIGHT_CLONES, "c": "original"},
            "c[1] is a view of c: it is c's memory, so c[1].mul_(2) overwrites values the "
            "saved c holds, and c must be copied first. (torch's own context misses this "
            "one; we come back to it below.)",
        ),
        wrong(
            {**_RIGHT_CLONES, "e1": "cloned"},
            "e[0] and e1 = e[1] share a storage but no element: zeroing row 0 leaves row 1 "
            "as it was, so the saved e1 needs no copy.",
        ),
        wrong(
            {**_RIGHT_CLONES, "q": "cloned"},
            "ExpBackward0 saved its result q, which is new memory; e[0], exp's input, was "
            "not saved, so writing it clones nothing.",
        ),
        wrong(
            dict.fromkeys(_RIGHT_CLONES, "cloned"),
            "the context clones only what a write is about to overwrite, and only when "
            "that happens: q and e1 are never written.",
        ),
        wrong(
            dict.fromkeys(_RIGHT_CLONES, "original"),
            "a saved tensor is cloned just before an op writes into its memory: b.add_(1) "
            "writes b, c[1].mul_(2) writes part of c.",
        ),
    ],
    parse=_read_clone_states,
    right=[
        {"e1": "original", "q": "original", "c": "cloned", "b": "cloned"},
        {"b": "Cloned", "c": "CLONED ", "q": "Original", "e1": "original"},
    ],
    hint="for each saved tensor ask: does one of the three writes change one of its "
    "elements? Then the context cloned it just before.",
)

# --- Exercise 5.2: clone before mul_ -----------------------------------------------------


def _mul_once(x, y):
    x.mul_(2)


def _mul_twice(x, y):
    x.mul_(2)
    x.mul_(3)


def _add_then_mul(x, y):
    x.add_(1)
    x.mul_(y)


def _mul_unwatched(x, y):
    y.mul_(2)


def _mul_out_of_place(x, y):
    return x * 2


def _read_then_written(x, y):
    y.mul_(x)
    x.add_(1)
    x.mul_(2)


def _equal_copy_written(x, y):
    z = x.clone()  # the same values as x, other memory, not watched
    z.mul_(2)
    return z


def _view_written(x, y):
    v = x.view(3)  # another tensor that starts at x's data_ptr: not x itself
    v.mul_(2)
    return v


def _scalar_overload(x, y):
    torch.ops.aten.mul_.Scalar(x, 2)  # the other overload of mul_


def _uses_results(x, y):
    return (x + y).mul_(2) - x.mul_(3)  # every op's result is used


#: The programs of exercise 5.2; each gets x (watched) and y (not watched).
MUL_PROGRAMS = {
    "x.mul_(2)": _mul_once,
    "x.mul_(2); x.mul_(3)": _mul_twice,
    "x.add_(1); x.mul_(y)": _add_then_mul,
    "y.mul_(2)": _mul_unwatched,
    "x * 2": _mul_out_of_place,
    "y.mul_(x); x.add_(1); x.mul_(2)": _read_then_written,
    "z = x.clone(); z.mul_(2)": _equal_copy_written,
    "torch.ops.aten.mul_.Scalar(x, 2)": _scalar_overload,
    "v = x.view(3); v.mul_(2)": _view_written,
    "(x + y).mul_(2) - x.mul_(3)": _uses_results,
}


def _run_mode(answer, program):
    """Run ``program`` under ``answer({"x": x})``; observe the clones, x, y and what the
    program computed (so a mode that drops an op's result is seen)."""
    x, y = torch.arange(1.0, 4.0), torch.full((3,), 5.0)
    mode = answer({"x": x})
    with mode:
        result = MUL_PROGRAMS[program](x, y)
    return {
        "cloned": dict(sorted(mode.cloned.items())),
        "x after": x,
        "y after": y,
        "program's result": result,
    }


class _CloneAfter(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if args[0] is t and name not in self.cloned:
                    self.cloned[name] = t.clone()
        return out


class _CloneEveryTime(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if args[0] is t:
                    self.cloned[name] = t.clone()
        return func(*args, **(kwargs or {}))


class _NeverRuns(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if args[0] is t and name not in self.cloned:
                    self.cloned[name] = t.clone()
        return args[0] if func.overloadpacket is torch.ops.aten.mul_ else func(*args, **(kwargs or {}))


class _AnyMul(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "mul" in str(func):  # aten.mul.Tensor too, which writes nothing
            for name, t in self.watched.items():
                if args[0] is t and name not in self.cloned:
                    self.cloned[name] = t.clone()
        return func(*args, **(kwargs or {}))


class _NoReturn(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if args[0] is t and name not in self.cloned:
                    self.cloned[name] = t.clone()
        func(*args, **(kwargs or {}))  # runs the op, but its result is dropped


class _ByValue(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if torch.equal(args[0], t) and name not in self.cloned:  # same values, any tensor
                    self.cloned[name] = t.clone()
        return func(*args, **(kwargs or {}))


class _SameAddress(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if args[0].data_ptr() == t.data_ptr() and name not in self.cloned:  # BAD: an address
                    self.cloned[name] = t.clone()
        return func(*args, **(kwargs or {}))


class _TensorOverloadOnly(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mul_.Tensor:  # mul_.Scalar slips through
            for name, t in self.watched.items():
                if args[0] is t and name not in self.cloned:
                    self.cloned[name] = t.clone()
        return func(*args, **(kwargs or {}))


class _CloneBeforeMulBySchema(TorchDispatchMode):
    """A right answer written differently: the op's schema name, and setdefault."""

    def __init__(self, watched):
        super().__init__()
        self.watched = watched
        self.cloned = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name == "aten::mul_":
            for name, t in self.watched.items():
                if t is args[0]:
                    self.cloned.setdefault(name, args[0].clone())
        out = func(*args, **(kwargs or {}))
        return out


class _AnyArgument(CloneBeforeMul):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops.aten.mul_:
            for name, t in self.watched.items():
                if any(a is t for a in args) and name not in self.cloned:  # read, not written
                    self.cloned[name] = t.clone()
        return func(*args, **(kwargs or {}))


class _CloneBeforeMulOneLayerUp(TorchFunctionMode):
    """5.2's oracle, from another layer of torch: the *function* layer, above dispatch.

    There ``x.mul_(2)`` arrives as the method ``Tensor.mul_`` and a direct
    ``torch.ops.aten.mul_.Scalar(x, 2)`` as that overload; an out-of-place ``x * 2`` is
    ``Tensor.mul`` and never matches. No dispatch mode and no schema is involved, so it
    does not share the reference's way of seeing the op.
    """

    def __init__(self, watched):
        super().__init__()
        self.watched = watched
        self.cloned = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        is_mul_ = func is torch.Tensor.mul_ or getattr(func, "overloadpacket", None) is torch.ops.aten.mul_
        if is_mul_:
            for name, t in self.watched.items():
                if args[0] is t and name not in self.cloned:
                    self.cloned[name] = t.clone()  # the mode is off in here
        return func(*args, **(kwargs or {}))


exercise(
    "5.2",
    name="CloneBeforeMul",
    title="A clone-before-mutate TorchDispatchMode for mul_",
    solution=CloneBeforeMul,
    oracle=_CloneBeforeMulOneLayerUp,
    run=_run_mode,
    points=2,
    cases=[case("x.mul_(2)"), case("x.mul_(2); x.mul_(3)"), case("y.mul_(2)")],
    hidden=[
        case("x.add_(1); x.mul_(y)", label="x.add_(1); x.mul_(y): the value just before mul_"),
        case("x * 2", label="x * 2: an out-of-place mul writes nothing"),
        case("y.mul_(x); x.add_(1); x.mul_(2)", label="x read by a mul_ that writes y, later written"),
        case("z = x.clone(); z.mul_(2)", label="z = x.clone(); z.mul_(2): equal values, another tensor"),
        case("torch.ops.aten.mul_.Scalar(x, 2)", label="the mul_.Scalar overload, called directly"),
        case("(x + y).mul_(2) - x.mul_(3)", label="a program that uses every op's result"),
        case(
            "v = x.view(3); v.mul_(2)",
            label="v = x.view(3); v.mul_(2): another tensor that starts where x does",
        ),
    ],
    wrong=[
        wrong(
            _CloneAfter,
            "you cloned after func ran, so the clone holds the new values: "
            "the clone must be taken before the op writes.",
        ),
        wrong(
            _CloneEveryTime,
            "keep the value from before the *first* mul_: a second "
            "mul_ must not overwrite the clone (backward needs the value that was saved).",
        ),
        wrong(
            _NeverRuns,
            "the mode must still run the op: __torch_dispatch__ "
            "replaces it, so unless you call func nothing gets multiplied.",
        ),
        wrong(
            _AnyMul,
            "aten.mul (out of place) writes nothing: test which op "
            "it is (its overload packet, aten.mul_), not whether its name contains mul.",
        ),
        wrong(
            _AnyArgument,
            "mul_ writes only its first argument (self, Tensor(a!) in the "
            "schema); y.mul_(x) reads x and leaves it as it was.",
        ),
        wrong(
            _NoReturn,
            "the op ran, but __torch_dispatch__ stands in for it: whatever it "
            "returns is the op's result for the program. Without a return, x * 2 gives "
            "None to the code that asked for it.",
        ),
        wrong(
            _ByValue,
            "watched means *this* tensor, not a tensor with the same values: "
            "z = x.clone() holds x's numbers in other memory, and writing z changes nothing "
            "backward saved. Compare identity, not contents.",
        ),
        wrong(
            _SameAddress,
            "watched means *this* tensor, and the spec asks whether the tensor mul_ writes is "
            "it: x.view(3) starts at x's data_ptr but is another tensor, which this mode does "
            "not watch. Compare identity (is), not addresses. (Exercise 5.3 asks the better "
            "question: which memory a write touches.)",
        ),
        wrong(
            _TensorOverloadOnly,
            "mul_ has more than one overload (mul_.Tensor, "
            "mul_.Scalar): a test on one overload lets the other write unseen. Test the "
            "overload packet, which groups them.",
        ),
    ],
    right=[_CloneBeforeMulBySchema],
    hint="the mode sees every op before it runs: decide whether this op writes a watched "
    "tensor (which op, which argument, and is it that very tensor?), keep the value from "
    "before the first such write, and remember the mode must still run the op and hand "
    "back its result.",
)

# --- Exercise 5.3: does a write to `mutated` change `saved`? -----------------------------


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

# --- Exercise 5.4: which writes clone the saved x? ---------------------------------------


def _clones_of_saved_x(write: str, context=allow_mutation_on_saved_tensors) -> int:
    """Run one write of 5.4 inside ``context`` after ``x`` was saved; how many clones it made."""
    w = torch.ones(2, 3, requires_grad=True)
    ns = {
        "torch": torch,
        "increment_version": increment_version,
        "x": torch.arange(6.0).reshape(2, 3),
        "y": torch.zeros(2, 3),
    }
    with torch.enable_grad(), context() as ctx:
        out = (w * ns["x"]).sum()  # MulBackward0 saves x (the grad of w is x)
        exec(write, ns)
        clones = len(ctx.cloned)
        out.backward()
    return clones


def _writes_that_clone():
    """Exercise 5.4's truth: per write, did the course's context clone the saved x?"""
    return [_clones_of_saved_x(write) > 0 for write in SAVED_X_WRITES]


_RIGHT_WRITES = [True, False, True, False, False, True]

predict(
    "5.4",
    name="predicted_write_clones",
    title="Which writes make the context clone the saved x",
    truth=_writes_that_clone,
    solution=predicted_write_clones,
    points=2,
    right=[tuple(_RIGHT_WRITES), [1, 0, 1, 0, 0, 1], [numpy.bool_(v) for v in _RIGHT_WRITES]],
    wrong=[
        wrong(
            [True, True, False, False, False, True],
            "the context does not watch version counters: increment_version(x) moves x's "
            "counter and writes nothing, while x.data shares x's memory with a counter of its "
            "own, so writing it moves nothing on x and still changes what was saved.",
        ),
        wrong(
            [False, False, False, False, False, True],
            "detach() and .data cut autograd's link to x, not the memory: they are x's bytes "
            "under another name, and the dispatch mode sees the write into those bytes.",
        ),
        wrong(
            [True, False, True, False, True, True],
            "torch.mul(x, 2, out=y) reads x and writes y: only an argument marked Tensor(a!) "
            "in the op's schema (self of an in-place op, out=) is written.",
        ),
        wrong(
            [True, False, True, False, False, False],
            "no_grad switches off graph recording, not the dispatch mode: the write still "
            "passes through __torch_dispatch__, which clones x before it.",
        ),
        wrong(
            [True, False, True, True, False, True],
            "x.clone() is new memory: writing it cannot change the saved x, so nothing is cloned.",
        ),
        wrong(
            [True] * 6,
            "the context clones a saved tensor only when an op is about to write into its "
            "memory; reading x, writing other memory or moving a counter clones nothing.",
        ),
    ],
    hint="for each line ask one question: does an op write into the bytes the saved x lives "
    "in? Names, version counters, autograd links and grad mode do not enter into it.",
)
