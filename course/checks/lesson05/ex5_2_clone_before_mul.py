"""Exercise 5.2, clone before mul_: how a call is run and observed, the oracle, the visible and hidden
cases, and the known wrong answers (each with the hint it earns) and right answers written
differently.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from course.checks import case, exercise, wrong
from course.checks.solutions.lesson05 import CloneBeforeMul


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


def _add_scaled_then_mul(x, y):
    x.add_(y, alpha=2)  # aten.add_.Tensor gets alpha as a keyword argument
    return x.mul_(2)


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
    "x.add_(y, alpha=2); x.mul_(2)": _add_scaled_then_mul,
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
        case("x.add_(y, alpha=2); x.mul_(2)", label="an op with a keyword argument (alpha) before the mul_"),
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
