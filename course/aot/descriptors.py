"""AOTAutograd descriptors: what each input and output of a joint graph means.

This is a readable copy of ``torch._functorch._aot_autograd.descriptors``
(torch 2.13). A joint graph from ``aot_export_joint_with_descriptors`` has no
fixed calling convention; instead every placeholder carries
``node.meta["desc"]`` (an ``AOTInput``) and the output node carries a list of
``AOTOutput`` (``None`` where a gradient does not exist). A descriptor is a
little path: it says how to get from the user's inputs and outputs to this one.

Examples
--------

On a joint graph of ``nn.Linear(3, 2)`` called on ``x``::

    ParamAOTInput(target='weight')                         # primals_1: self.weight
    PlainAOTInput(idx=0)                                   # primals_3: x, as is
    TangentAOTInput(output=PlainAOTOutput(idx=0))          # tangents_1: d(loss)/d(out)
    PlainAOTOutput(idx=0)                                  # the forward result
    GradAOTOutput(grad_of=ParamAOTInput(target='weight'))  # d(loss)/d(weight)

More exotic ones, each made by one stage of AOTAutograd (all from tests/corpus.py)::

    InputMutationAOTOutput(mutated_input=BufferAOTInput(target='running_mean'))
    IntermediateBaseAOTOutput(base_of=PlainAOTOutput(idx=0))  # outputs alias each other
    ViewBaseAOTInput(base_of=PlainAOTInput(idx=0))            # inputs alias each other
    SubclassGetAttrAOTInput(base=PlainAOTInput(idx=0), attr='a')  # TwoTensor's .a

>>> d = GradAOTOutput(grad_of=ParamAOTInput(target="weight"))
>>> d
GradAOTOutput(grad_of=ParamAOTInput(target='weight'))
>>> d.expr(), d.is_grad(), d.grad_of.is_param()
("__grad(self.get_parameter('weight'))", True, True)
>>> to_torch(d) == d, from_torch(to_torch(d)) == d   # different classes, same value
(False, True)

The pipeline and which nestings are legal
-----------------------------------------

AOTAutograd builds descriptors in five stages, always in this order:

1. plain: ``PlainAOTInput``, ``ParamAOTInput``, ``BufferAOTInput``, ``PlainAOTOutput``
   (and the placeholders ``DummyAOTInput``, ``DummyAOTOutput``);
2. views and mutations: ``ViewBaseAOTInput``, ``SyntheticBaseAOTInput``,
   ``InputMutationAOTOutput``, ``IntermediateBaseAOTOutput``, ``MetadataMutationAOTOutput``;
3. autograd: ``TangentAOTInput``, ``GradAOTOutput``;
4. subclasses: ``SubclassGetAttrAOTInput``, ``SubclassSizeAOTInput``, ... (and outputs);
5. tokens and RNG: ``ForwardTokenAOTInput``, ``Philox*``, ... (leaves, never wrapped);

and the partitioner adds ``SavedForBackwardsAOTOutput`` (stage 6, a leaf). A descriptor
may wrap only descriptors of its own stage or an earlier one; autograd wraps strictly
earlier ones (no double backward). ``validate`` checks exactly this::

    SubclassGetAttrAOTInput(TangentAOTInput(PlainAOTOutput(0)), 'a')   # OK  4 wraps 3
    SubclassGetAttrAOTOutput(GradAOTOutput(PlainAOTInput(0)), 'a')     # OK  4 wraps 3
    InputMutationAOTOutput(ViewBaseAOTInput(PlainAOTInput(0)))         # OK  2 wraps 2
    TangentAOTInput(SubclassGetAttrAOTOutput(PlainAOTOutput(0), 'a'))  # BAD 3 wraps 4
    GradAOTOutput(SubclassGetAttrAOTInput(PlainAOTInput(0), 'a'))      # BAD 3 wraps 4
    TangentAOTInput(GradAOTOutput(PlainAOTInput(0)))                   # BAD 3 wraps 3
    ViewBaseAOTInput(TangentAOTInput(PlainAOTOutput(0)))               # BAD 2 wraps 3

>>> validate(ViewBaseAOTInput(base_of=TangentAOTInput(PlainAOTOutput(0))))
... # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
  ...
ValueError: ViewBaseAOTInput (stage 2, views and mutations) cannot wrap TangentAOTInput
(stage 3, autograd): AOTAutograd builds descriptors in the order plain -> views and
mutations -> autograd -> subclasses -> tokens and RNG, and a descriptor may only wrap
one made at its own stage or earlier.

Index
-----

* Inputs, important: ``PlainAOTInput``, ``ParamAOTInput``, ``BufferAOTInput``,
  ``TangentAOTInput``, ``SubclassGetAttrAOTInput`` / ``SubclassSizeAOTInput`` /
  ``SubclassStrideAOTInput``.
* Inputs, views: ``ViewBaseAOTInput``, ``SyntheticBaseAOTInput``.
* Inputs, non-tensor: ``DummyAOTInput``, ``PhiloxForwardSeedAOTInput``,
  ``PhiloxForwardBaseOffsetAOTInput``, ``PhiloxBackwardSeedAOTInput``,
  ``PhiloxBackwardBaseOffsetAOTInput``, ``ForwardTokenAOTInput``, ``BackwardTokenAOTInput``.
* Outputs, important: ``PlainAOTOutput``, ``GradAOTOutput``, ``SubclassGetAttrAOTOutput``
  / ``SubclassSizeAOTOutput`` / ``SubclassStrideAOTOutput``.
* Outputs, obscure: ``InputMutationAOTOutput``, ``IntermediateBaseAOTOutput``,
  ``MetadataMutationAOTOutput``.
* Outputs, non-tensor: ``PhiloxUpdatedForwardOffsetAOTOutput``,
  ``PhiloxUpdatedBackwardOffsetAOTOutput``, ``ForwardTokenAOTOutput``,
  ``BackwardTokenAOTOutput``, ``DummyAOTOutput``, ``SavedForBackwardsAOTOutput``,
  ``SavedForBackwardsNoVcCheckAOTOutput``.
* Bases: ``AOTInput``, ``AOTOutput``, ``DifferentiableAOTInput`` (what ``GradAOTOutput``
  may wrap), ``DifferentiableAOTOutput`` (what ``TangentAOTInput`` may wrap).
* Functions: ``from_torch``, ``to_torch``, ``validate``.

Differences from torch
----------------------

* The classes are ours, so ``to_torch(d) != d``; compare through ``from_torch``.
  Repr, field names, equality among our classes and ``hash`` match torch's.
* The ``AssertionError`` of ``TangentAOTInput`` / ``GradAOTOutput`` for a wrong kind
  starts with torch's text and then explains the pipeline order.
* ``validate``, ``from_torch`` and ``to_torch`` are ours.
"""

import dataclasses
import sys
from typing import Any

import torch._functorch._aot_autograd.descriptors as _torch_descriptors

from course._torch_version import SUPPORTED_TORCH, UnsupportedTorchError, require_supported_torch

require_supported_torch("course.aot.descriptors")

# ---- bases -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AOTInput:
    """Describes where an input from an AOTAutograd produced FX graph comes from"""

    def expr(self) -> str:
        raise NotImplementedError("Subclasses must implement expr()")

    def is_param(self) -> bool:
        """True if this input is a parameter or derived from a parameter (e.g., subclass attr)"""
        return False

    def is_buffer(self) -> bool:
        """True if this input is a buffer or derived from a buffer (e.g., subclass attr)"""
        return False

    def is_tangent(self) -> bool:
        """True if this input is a tangent or derived from a tangent (e.g., subclass attr)"""
        return False


@dataclasses.dataclass(frozen=True)
class DifferentiableAOTInput(AOTInput):
    """A subclass that classifies AOTInput that can be wrapped by GradAOTOutput"""


@dataclasses.dataclass(frozen=True)
class AOTOutput:
    """Describes where an output from an AOTAutograd produced FX graph will
    eventually be bundled into the final output"""

    def expr(self) -> str:
        raise NotImplementedError("Subclasses must implement expr()")

    def is_grad(self) -> bool:
        """True if this output is a grad or derived from a grad (e.g., subclass attr)"""
        return False


@dataclasses.dataclass(frozen=True)
class DifferentiableAOTOutput(AOTOutput):
    """A subclass that classifies AOTOutput that can be wrapped by TangentAOTInput"""


# ---- inputs ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ParamAOTInput(DifferentiableAOTInput):
    """The input is a parameter, whose FQN is target"""

    target: str

    def expr(self) -> str:
        return f"self.get_parameter({self.target!r})"

    def is_param(self) -> bool:
        return True

    def is_buffer(self) -> bool:
        return False


@dataclasses.dataclass(frozen=True)
class BufferAOTInput(DifferentiableAOTInput):
    """The input is a buffer, whose FQN is target"""

    target: str

    def expr(self) -> str:
        return f"self.get_buffer({self.target!r})"

    def is_param(self) -> bool:
        return False

    def is_buffer(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class DummyAOTInput(AOTInput):
    """A stand-in for code that needs an AOTInput but ignores it (compile vs run time)."""

    idx: int

    def expr(self) -> str:
        return f"__dummy{self.idx}"


@dataclasses.dataclass(frozen=True)
class PlainAOTInput(DifferentiableAOTInput):
    """The input is a plain input, corresponding to a particular positional index
    of the *flat* calling convention."""

    idx: int

    def expr(self) -> str:
        return f"args[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class SubclassGetAttrAOTInput(AOTInput):
    """Which attribute (inner tensor) of the subclass input ``base`` this input is."""

    base: AOTInput
    attr: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def is_param(self) -> bool:
        return self.base.is_param()

    def is_buffer(self) -> bool:
        return self.base.is_buffer()

    def is_tangent(self) -> bool:
        return self.base.is_tangent()


@dataclasses.dataclass(frozen=True)
class SubclassSizeAOTInput(AOTInput):
    """Which subclass this particular outer size SymInt input (at dim idx) came from."""

    base: AOTInput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.size({self.idx})"


@dataclasses.dataclass(frozen=True)
class SubclassStrideAOTInput(AOTInput):
    """Which subclass this particular outer stride SymInt input (at dim idx) came from."""

    base: AOTInput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.stride({self.idx})"


@dataclasses.dataclass(frozen=True)
class ViewBaseAOTInput(DifferentiableAOTInput):
    """The single base that replaced several differentiable inputs viewing the same tensor."""

    base_of: AOTInput

    def expr(self) -> str:
        return f"{self.base_of.expr()}._base"


@dataclasses.dataclass(frozen=True)
class SyntheticBaseAOTInput(DifferentiableAOTInput):
    """Like ViewBaseAOTInput, but no view was differentiable, so the base was synthesized."""

    base_of: AOTInput

    def expr(self) -> str:
        return f"__make_synthetic_base({self.base_of.expr()})"


@dataclasses.dataclass(frozen=True)
class PhiloxForwardSeedAOTInput(AOTInput):
    """The seed for functionalized Philox RNG calls, specifically for forward graph."""

    def expr(self) -> str:
        return "__philox_forward_seed"


@dataclasses.dataclass(frozen=True)
class PhiloxForwardBaseOffsetAOTInput(AOTInput):
    """The offset for functionalized Philox RNG calls, specifically for forward graph."""

    def expr(self) -> str:
        return "__philox_forward_base_offset"


@dataclasses.dataclass(frozen=True)
class PhiloxBackwardSeedAOTInput(AOTInput):
    """The seed for functionalized Philox RNG calls, specifically for backward graph."""

    def expr(self) -> str:
        return "__philox_backward_seed"


@dataclasses.dataclass(frozen=True)
class PhiloxBackwardBaseOffsetAOTInput(AOTInput):
    """The offset for functionalized Philox RNG calls, specifically for backward graph."""

    def expr(self) -> str:
        return "__philox_backward_base_offset"


@dataclasses.dataclass(frozen=True)
class ForwardTokenAOTInput(AOTInput):
    """The world token which is threaded through side-effectful operations"""

    idx: int

    def expr(self) -> str:
        return f"__forward_token{self.idx}"


@dataclasses.dataclass(frozen=True)
class BackwardTokenAOTInput(AOTInput):
    """The world token which is threaded through side-effectful operations, for backwards"""

    idx: int

    def expr(self) -> str:
        return f"__backward_token{self.idx}"


def _wrong_kind(owner: str, field: str, expected: str, got: object) -> AssertionError:
    # torch's message first, then why: only an earlier stage can be wrapped.
    return AssertionError(
        f"expected {field} to be {expected}, got {type(got)}. {owner} is made by the "
        f"autograd stage, which runs after views/mutations and before subclasses and tokens, "
        f"so it can only wrap a differentiable descriptor made before it (plain, param, "
        f"buffer, view or mutation), never a subclass, token, RNG, dummy or saved one."
    )


@dataclasses.dataclass(frozen=True)
class TangentAOTInput(DifferentiableAOTInput):
    """An input to the joint graph representing the tangent of an output."""

    output: DifferentiableAOTOutput

    def __post_init__(self) -> None:
        if not isinstance(self.output, DifferentiableAOTOutput):
            raise _wrong_kind("TangentAOTInput", "output", "DifferentiableAOTOutput", self.output)

    def expr(self) -> str:
        return f"__output_tangent({self.output.expr()})"

    def is_tangent(self) -> bool:
        return True


# ---- outputs -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PlainAOTOutput(DifferentiableAOTOutput):
    """A plain tensor output at position idx of the output tuple"""

    idx: int

    def expr(self) -> str:
        return f"output[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class InputMutationAOTOutput(DifferentiableAOTOutput):
    """The mutated value of an input tensor, returned so we can appropriately propagate autograd."""

    mutated_input: AOTInput

    def expr(self) -> str:
        return f"__input_mutation({self.mutated_input.expr()})"


@dataclasses.dataclass(frozen=True)
class IntermediateBaseAOTOutput(DifferentiableAOTOutput):
    """An intermediate base of multiple outputs which alias each other (we name ONE of them)."""

    base_of: AOTOutput

    def expr(self) -> str:
        return f"__intermediate_base({self.base_of.expr()})"


@dataclasses.dataclass(frozen=True)
class MetadataMutationAOTOutput(DifferentiableAOTOutput):
    """An aliased argument whose metadata (sizes, strides) was mutated."""

    idx: int

    def expr(self) -> str:
        return f"__aliased_arg_with_metadata_mutation{self.idx}"


@dataclasses.dataclass(frozen=True)
class GradAOTOutput(DifferentiableAOTOutput):
    """An output representing the computed gradient for a differentiable input, in the joint graph"""

    grad_of: DifferentiableAOTInput

    def __post_init__(self) -> None:
        if not isinstance(self.grad_of, DifferentiableAOTInput):
            raise _wrong_kind("GradAOTOutput", "grad_of", "DifferentiableAOTInput", self.grad_of)

    def expr(self) -> str:
        return f"__grad({self.grad_of.expr()})"

    def is_grad(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class PhiloxUpdatedForwardOffsetAOTOutput(AOTOutput):
    """The final offset from the functionalized RNG calls, forward only"""

    def expr(self) -> str:
        return "__philox_updated_forward_offset"


@dataclasses.dataclass(frozen=True)
class PhiloxUpdatedBackwardOffsetAOTOutput(AOTOutput):
    """The final offset from the functionalized RNG calls, backward only"""

    def expr(self) -> str:
        return "__philox_updated_backward_offset"


@dataclasses.dataclass(frozen=True)
class ForwardTokenAOTOutput(AOTOutput):
    """The world token output for side-effectful calls, returned so we cannot DCE it, forward only"""

    idx: int

    def expr(self) -> str:
        return f"__forward_token{self.idx}"


@dataclasses.dataclass(frozen=True)
class BackwardTokenAOTOutput(AOTOutput):
    """The world token output for side-effectful calls, returned so we cannot DCE it, backward only"""

    idx: int

    def expr(self) -> str:
        return f"__backward_token{self.idx}"


@dataclasses.dataclass(frozen=True)
class SubclassGetAttrAOTOutput(AOTOutput):
    """This output will be bundled into a subclass at this location"""

    base: AOTOutput
    attr: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def is_grad(self) -> bool:
        return self.base.is_grad()


@dataclasses.dataclass(frozen=True)
class SubclassSizeAOTOutput(AOTOutput):
    """This output size will be bundled into a subclass at this location"""

    base: AOTOutput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.size({self.idx})"


@dataclasses.dataclass(frozen=True)
class SubclassStrideAOTOutput(AOTOutput):
    """This output stride will be bundled into a subclass at this location"""

    base: AOTOutput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.stride({self.idx})"


@dataclasses.dataclass(frozen=True)
class DummyAOTOutput(AOTOutput):
    """For cases when you don't care about descriptor propagation; avoid normally."""

    idx: int

    def expr(self) -> str:
        return f"__dummy{self.idx}"


@dataclasses.dataclass(frozen=True)
class SavedForBackwardsAOTOutput(AOTOutput):
    """An activation the partitioned forward saves for the backward."""

    idx: int

    def expr(self) -> str:
        return f"__saved_for_backwards_{self.idx}"


@dataclasses.dataclass(frozen=True)
class SavedForBackwardsNoVcCheckAOTOutput(AOTOutput):
    """A saved activation stashed on ctx directly, so no version-counter check in backward."""

    idx: int

    def expr(self) -> str:
        return f"__saved_for_backwards_no_vc_check_{self.idx}"


# ---- conversion to and from torch's classes ----------------------------------------------

#: Our descriptor classes by name, bases included (the same 35 names torch 2.13 defines).
_CLASSES: dict[str, type] = {
    name: obj
    for name, obj in dict(globals()).items()
    if isinstance(obj, type) and issubclass(obj, (AOTInput, AOTOutput))
}
_TORCH_BASES = (_torch_descriptors.AOTInput, _torch_descriptors.AOTOutput)


def _convert(desc: Any, to_module: Any, from_bases: tuple, to_bases: tuple, api: str) -> Any:
    if isinstance(desc, to_bases):
        return desc  # already on the requested side
    if not isinstance(desc, from_bases):
        raise TypeError(f"{api} expects an AOTInput or AOTOutput, got {type(desc).__name__}")
    name = type(desc).__name__
    target = getattr(to_module, name, None)
    if target is None or type(desc) is not _side(desc, name):
        raise UnsupportedTorchError(
            f"{api}: unknown descriptor class {type(desc).__module__}.{type(desc).__qualname__}; "
            f"course.aot.descriptors mirrors torch {SUPPORTED_TORCH} and has no counterpart for it "
            "(a newer torch may have added it)."
        )
    fields = {
        f.name: _convert(v, to_module, from_bases, to_bases, api)
        if isinstance(v, from_bases + to_bases)
        else v
        for f in dataclasses.fields(desc)
        for v in [getattr(desc, f.name)]
    }
    return target(**fields)


def _side(desc: Any, name: str) -> type:
    # The known class of that name on desc's own side (a torch subclass of a known class is unknown).
    if isinstance(desc, _TORCH_BASES):
        return getattr(_torch_descriptors, name, None)
    return _CLASSES.get(name)


def from_torch(desc: Any) -> Any:
    """Convert a torch descriptor (nested ones included) to the course class of the same name.

    Args:
        desc: an instance of a class from ``torch._functorch._aot_autograd.descriptors``.
            A course descriptor is returned unchanged.

    Returns:
        The equal course descriptor; its repr and hash equal torch's.

    Raises:
        TypeError: ``desc`` is not a descriptor.
        UnsupportedTorchError: ``desc``'s class is one this course does not know (for
            example from a newer torch); the message names it and the supported range.

    Example:
        >>> import torch._functorch._aot_autograd.descriptors as T
        >>> from_torch(T.TangentAOTInput(T.PlainAOTOutput(0)))
        TangentAOTInput(output=PlainAOTOutput(idx=0))
    """
    return _convert(desc, _THIS_MODULE, _TORCH_BASES, (AOTInput, AOTOutput), "from_torch")


def to_torch(desc: Any) -> Any:
    """Convert a course descriptor (nested ones included) to torch's class of the same name.

    Args:
        desc: a course descriptor. A torch descriptor is returned unchanged.

    Returns:
        The equal torch descriptor, ready for a ``node.meta["desc"]`` torch reads.

    Raises:
        TypeError: ``desc`` is not a descriptor.
        UnsupportedTorchError: ``desc``'s class is a subclass this course does not know.

    Example:
        >>> t = to_torch(GradAOTOutput(ParamAOTInput("weight")))
        >>> type(t).__module__
        'torch._functorch._aot_autograd.descriptors'
    """
    return _convert(desc, _torch_descriptors, (AOTInput, AOTOutput), _TORCH_BASES, "to_torch")


# ---- validation: the pipeline order ------------------------------------------------------

_STAGE_NAMES = {
    1: "plain",
    2: "views and mutations",
    3: "autograd",
    4: "subclasses",
    5: "tokens and RNG",
    6: "partitioner",
}
_STAGE: dict[type, int] = {
    PlainAOTInput: 1, ParamAOTInput: 1, BufferAOTInput: 1, DummyAOTInput: 1,
    PlainAOTOutput: 1, DummyAOTOutput: 1,
    ViewBaseAOTInput: 2, SyntheticBaseAOTInput: 2, InputMutationAOTOutput: 2,
    IntermediateBaseAOTOutput: 2, MetadataMutationAOTOutput: 2,
    TangentAOTInput: 3, GradAOTOutput: 3,
    SubclassGetAttrAOTInput: 4, SubclassSizeAOTInput: 4, SubclassStrideAOTInput: 4,
    SubclassGetAttrAOTOutput: 4, SubclassSizeAOTOutput: 4, SubclassStrideAOTOutput: 4,
    PhiloxForwardSeedAOTInput: 5, PhiloxForwardBaseOffsetAOTInput: 5,
    PhiloxBackwardSeedAOTInput: 5, PhiloxBackwardBaseOffsetAOTInput: 5,
    ForwardTokenAOTInput: 5, BackwardTokenAOTInput: 5,
    PhiloxUpdatedForwardOffsetAOTOutput: 5, PhiloxUpdatedBackwardOffsetAOTOutput: 5,
    ForwardTokenAOTOutput: 5, BackwardTokenAOTOutput: 5,
    SavedForBackwardsAOTOutput: 6, SavedForBackwardsNoVcCheckAOTOutput: 6,
}  # fmt: skip
_ORDER = " -> ".join(_STAGE_NAMES[i] for i in range(1, 6))


def _label(cls: type) -> str:
    stage = _STAGE[cls]
    return f"{cls.__name__} (stage {stage}, {_STAGE_NAMES[stage]})"


def validate(desc: Any) -> Any:
    """Check that ``desc`` (course's or torch's) nests only as AOTAutograd's pipeline allows.

    A descriptor may wrap one of its own stage or an earlier one (see the module docstring);
    the autograd stage wraps only earlier ones, since there is no double backward. Inputs
    wrap inputs and outputs wrap outputs, except the tangent (wraps an output) and the grad
    (wraps an input) and a mutation output (wraps the mutated input).

    Args:
        desc: a descriptor; torch's are converted with :func:`from_torch` first.

    Returns:
        ``desc`` itself, so calls can be chained.

    Raises:
        ValueError: the nesting is illegal, or ``desc`` is an abstract base class instance;
            the message names both descriptors, their stages and the order.
        TypeError: a field has the wrong type (for example a str where an int belongs).

    Example:
        >>> validate(SubclassGetAttrAOTOutput(GradAOTOutput(PlainAOTInput(0)), "a"))
        SubclassGetAttrAOTOutput(base=GradAOTOutput(grad_of=PlainAOTInput(idx=0)), attr='a')
    """
    course_desc = from_torch(desc)
    _validate(course_desc)
    return desc


def _validate(desc: Any) -> None:
    cls = type(desc)
    if cls not in _STAGE:
        raise ValueError(
            f"{cls.__name__}() is an abstract base; joint graphs only hold its subclasses"
        )
    for field in dataclasses.fields(desc):
        value = getattr(desc, field.name)
        expected = field.type if isinstance(field.type, type) else _CLASSES[field.type]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise TypeError(
                f"{cls.__name__}.{field.name} must be {expected.__name__}, "
                f"got {type(value).__name__}"
            )
        if isinstance(value, (AOTInput, AOTOutput)):
            _check_nesting(desc, value)
            _validate(value)


def _check_nesting(outer: Any, inner: Any) -> None:
    if type(inner) not in _STAGE:
        raise ValueError(f"{type(inner).__name__}() is an abstract base and cannot be wrapped")
    outer_stage, inner_stage = _STAGE[type(outer)], _STAGE[type(inner)]
    if inner_stage > outer_stage or (outer_stage == 3 and inner_stage == 3):
        why = (
            "AOTAutograd does not do double backward, so autograd never wraps autograd"
            if inner_stage == outer_stage
            else f"AOTAutograd builds descriptors in the order {_ORDER}, and a descriptor "
            "may only wrap one made at its own stage or earlier"
        )
        raise ValueError(f"{_label(type(outer))} cannot wrap {_label(type(inner))}: {why}.")


_THIS_MODULE = sys.modules[__name__]

__all__ = sorted([*_CLASSES, "from_torch", "to_torch", "validate"])
