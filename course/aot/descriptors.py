"""AOTAutograd descriptors: what each input and output of a joint graph means.

What is ours and what is torch's: the 35 classes are re-implemented here as plain
Python (torch's are plain Python too, in ``torch._functorch._aot_autograd.descriptors``,
torch 2.13); names, fields, ``repr``, ``hash``, ``expr()`` and ``is_*()`` are kept
identical on purpose, the explanations are ours. Nothing here calls into torch except
``from_torch`` / ``to_torch``, which convert between the two families of classes.

A joint graph from ``aot_export_joint_with_descriptors`` has no fixed calling
convention; instead every placeholder carries ``node.meta["desc"]`` (an ``AOTInput``)
and the output node carries a list of ``AOTOutput`` (``None`` where a gradient does not
exist). A descriptor is a little path: it says how to get from the user's inputs and
outputs to this one.

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
>>> type(to_torch(d)) is type(d), to_torch(d) == d   # different classes, equal values
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

* The classes are ours, but a descriptor equals its torch twin, both ways
  (``PlainAOTInput(0) == torch's PlainAOTInput(0)`` and the reverse), with the same
  hash, so a dict keyed by either family finds the other's keys. Among torch's own
  classes torch compares by class and fields; among ours, so do we.
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

# Every class below is a frozen dataclass whose equality and hash come from its base
# (eq=False keeps the dataclass machinery from writing its own), so that a course
# descriptor and its torch twin are interchangeable as dict keys; see _same_value.
_descriptor = dataclasses.dataclass(frozen=True, eq=False)


def _field_values(desc: Any) -> tuple:
    return tuple(getattr(desc, f.name) for f in dataclasses.fields(desc))


def _same_value(ours: Any, other: Any) -> Any:
    """``ours == other``: True for the same class, or torch's class of the same name, and equal fields.

    torch's dataclass ``__eq__`` answers ``NotImplemented`` for a class not its own, so
    Python then asks ours: ``torch_desc == course_desc`` lands here too. Fields compare
    with ``==`` as well, so nested descriptors may come from either side.
    """
    twin = getattr(_torch_descriptors, type(ours).__name__, None)
    if type(other) is not type(ours) and type(other) is not twin:
        return NotImplemented
    return _field_values(ours) == _field_values(other)


def _hash(desc: Any) -> int:
    # What a frozen dataclass hashes (the tuple of its fields), so torch's twin hashes the same.
    return hash(_field_values(desc))


@_descriptor
class AOTInput:
    """Base of every input descriptor: what one placeholder of a joint graph holds.

    Never on a graph itself; a placeholder carries one of its subclasses in
    ``node.meta["desc"]``, e.g. ``in primals_1 ParamAOTInput(target='weight')``.
    """

    __eq__ = _same_value
    __hash__ = _hash

    def expr(self) -> str:
        raise NotImplementedError("Subclasses must implement expr()")

    def is_param(self) -> bool:
        """Does this input come from a parameter (itself, or a piece of a subclass parameter)?"""
        return False

    def is_buffer(self) -> bool:
        """Does this input come from a buffer (itself, or a piece of a subclass buffer)?"""
        return False

    def is_tangent(self) -> bool:
        """Is this input a tangent (itself, or a piece of a subclass tangent)?"""
        return False


@_descriptor
class DifferentiableAOTInput(AOTInput):
    """Base of the input descriptors a gradient can be taken for.

    ``GradAOTOutput(grad_of=...)`` accepts only these: plain inputs, parameters, buffers,
    view and synthetic bases, and tangents. Tokens, RNG state, dummies and subclass
    pieces are plain ``AOTInput``.
    """


@_descriptor
class AOTOutput:
    """Base of every output descriptor: what one element of the output node holds.

    Never on a graph itself; the output node's ``meta["desc"]`` lists its subclasses
    (``None`` for a missing grad), e.g. ``out addmm PlainAOTOutput(idx=0)``.
    """

    __eq__ = _same_value
    __hash__ = _hash

    def expr(self) -> str:
        raise NotImplementedError("Subclasses must implement expr()")

    def is_grad(self) -> bool:
        """Is this output a gradient (itself, or a piece of a subclass gradient)?"""
        return False


@_descriptor
class DifferentiableAOTOutput(AOTOutput):
    """Base of the output descriptors a tangent can be fed in for.

    ``TangentAOTInput(output=...)`` accepts only these: user outputs, mutated inputs,
    intermediate bases, metadata mutations and grads.
    """


# ---- inputs ------------------------------------------------------------------------------


@_descriptor
class ParamAOTInput(DifferentiableAOTInput):
    """An ``nn.Parameter`` of the traced module; ``target`` is its qualified name.

    Parameters come first in the joint's inputs, in ``named_parameters()`` order::

        in  primals_1   ParamAOTInput(target='weight')     # self.weight of nn.Linear
    """

    target: str

    def expr(self) -> str:
        return f"self.get_parameter({self.target!r})"

    def is_param(self) -> bool:
        return True

    def is_buffer(self) -> bool:
        return False


@_descriptor
class BufferAOTInput(DifferentiableAOTInput):
    """A registered buffer of the traced module; ``target`` is its qualified name.

    Buffers follow the parameters (BatchNorm's running statistics, for example)::

        BufferAOTInput(target='running_mean')       # BatchNorm's running mean
    """

    target: str

    def expr(self) -> str:
        return f"self.get_buffer({self.target!r})"

    def is_param(self) -> bool:
        return False

    def is_buffer(self) -> bool:
        return True


@_descriptor
class DummyAOTInput(AOTInput):
    """A placeholder descriptor, for code that must be handed an AOTInput but reads none.

    Not found on an exported joint graph; ``idx`` only tells dummies apart.
    """

    idx: int

    def expr(self) -> str:
        return f"__dummy{self.idx}"


@_descriptor
class PlainAOTInput(DifferentiableAOTInput):
    """A user argument, by its position in the *flattened* argument list.

    ``idx`` counts after pytree flattening, so ``f((x, y), z)`` gives idx 0, 1, 2::

        in  primals_3   PlainAOTInput(idx=0)    # x of nn.Linear's forward(x)
    """

    idx: int

    def expr(self) -> str:
        return f"args[{self.idx}]"


@_descriptor
class SubclassGetAttrAOTInput(AOTInput):
    """One inner tensor of a tensor-subclass input (its attribute ``attr``).

    Joint graphs take plain tensors only, so a subclass input such as ``TwoTensor`` is
    split into its inner tensors, one placeholder each (nested subclasses nest)::

        SubclassGetAttrAOTInput(base=PlainAOTInput(idx=0), attr='a')   # TwoTensor's .a
    """

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


@_descriptor
class SubclassSizeAOTInput(AOTInput):
    """The outer size at dimension ``idx`` of a subclass input, as a SymInt.

    Appears beside the subclass's inner tensors when its sizes are symbolic (dynamic
    shapes); it is an integer, not a tensor, so no gradient flows to it:
    ``SubclassSizeAOTInput(base=PlainAOTInput(idx=0), idx=1)`` is ``args[0].size(1)``.
    """

    base: AOTInput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.size({self.idx})"


@_descriptor
class SubclassStrideAOTInput(AOTInput):
    """The outer stride at dimension ``idx`` of a subclass input, as a SymInt.

    The stride twin of :class:`SubclassSizeAOTInput`:
    ``SubclassStrideAOTInput(base=PlainAOTInput(idx=0), idx=0)`` is ``args[0].stride(0)``.
    """

    base: AOTInput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.stride({self.idx})"


@_descriptor
class ViewBaseAOTInput(DifferentiableAOTInput):
    """The base that stands in for several inputs that are views of one tensor.

    Two or more differentiable inputs that view one tensor are replaced by that tensor
    (their ``._base``), taken once; the grad is computed for it, and ``base_of`` names
    one of the inputs it replaced (clone the views beforehand to avoid this)::

        ViewBaseAOTInput(base_of=PlainAOTInput(idx=0))
    """

    base_of: AOTInput

    def expr(self) -> str:
        return f"{self.base_of.expr()}._base"


@_descriptor
class SyntheticBaseAOTInput(DifferentiableAOTInput):
    """A base AOTAutograd made up for aliased inputs that are not differentiable views.

    Like :class:`ViewBaseAOTInput`, but no input's ``._base`` could serve, so a base is
    built from the aliased inputs: ``SyntheticBaseAOTInput(base_of=PlainAOTInput(idx=1))``.
    """

    base_of: AOTInput

    def expr(self) -> str:
        return f"__make_synthetic_base({self.base_of.expr()})"


@_descriptor
class PhiloxForwardSeedAOTInput(AOTInput):
    """The RNG seed the forward graph's random ops draw from.

    Appears when random ops (dropout) are made functional with the Philox generator,
    so the graph takes its RNG state as inputs: ``PhiloxForwardSeedAOTInput()``.
    """

    def expr(self) -> str:
        return "__philox_forward_seed"


@_descriptor
class PhiloxForwardBaseOffsetAOTInput(AOTInput):
    """The RNG offset the forward graph's random ops start from.

    The partner of :class:`PhiloxForwardSeedAOTInput`: ``PhiloxForwardBaseOffsetAOTInput()``.
    """

    def expr(self) -> str:
        return "__philox_forward_base_offset"


@_descriptor
class PhiloxBackwardSeedAOTInput(AOTInput):
    """The RNG seed the backward graph's random ops draw from.

    The backward's copy of :class:`PhiloxForwardSeedAOTInput`: ``PhiloxBackwardSeedAOTInput()``.
    """

    def expr(self) -> str:
        return "__philox_backward_seed"


@_descriptor
class PhiloxBackwardBaseOffsetAOTInput(AOTInput):
    """The RNG offset the backward graph's random ops start from.

    ``PhiloxBackwardBaseOffsetAOTInput()``, beside :class:`PhiloxBackwardSeedAOTInput`.
    """

    def expr(self) -> str:
        return "__philox_backward_base_offset"


@_descriptor
class ForwardTokenAOTInput(AOTInput):
    """An effect token passed into the forward, ordering ops with side effects.

    Ops with side effects (printing, some custom ops) take and return a token so that
    the compiler keeps them in order; ``idx`` numbers the tokens: ``ForwardTokenAOTInput(idx=0)``.
    """

    idx: int

    def expr(self) -> str:
        return f"__forward_token{self.idx}"


@_descriptor
class BackwardTokenAOTInput(AOTInput):
    """An effect token passed into the backward, as :class:`ForwardTokenAOTInput` is to the forward.

    ``BackwardTokenAOTInput(idx=0)``.
    """

    idx: int

    def expr(self) -> str:
        return f"__backward_token{self.idx}"


def _wrong_kind(owner: str, field: str, expected: str, got: object) -> AssertionError:
    # Conformance: the first sentence is torch's AssertionError, word for word (tests/
    # test_descriptors.py checks that ours starts with it); the rest, why, is ours.
    return AssertionError(
        f"expected {field} to be {expected}, got {type(got)}. {owner} is made by the "
        f"autograd stage, which runs after views/mutations and before subclasses and tokens, "
        f"so it can only wrap a differentiable descriptor made before it (plain, param, "
        f"buffer, view or mutation), never a subclass, token, RNG, dummy or saved one."
    )


@_descriptor
class TangentAOTInput(DifferentiableAOTInput):
    """The incoming gradient (tangent) for one differentiable output of the forward.

    The backward half of the joint starts from these, one per output that needs a grad;
    ``output`` says which output it belongs to::

        in  tangents_1  TangentAOTInput(output=PlainAOTOutput(idx=0))
    """

    output: DifferentiableAOTOutput

    def __post_init__(self) -> None:
        if not isinstance(self.output, DifferentiableAOTOutput):
            raise _wrong_kind("TangentAOTInput", "output", "DifferentiableAOTOutput", self.output)

    def expr(self) -> str:
        return f"__output_tangent({self.output.expr()})"

    def is_tangent(self) -> bool:
        return True


# ---- outputs -----------------------------------------------------------------------------


@_descriptor
class PlainAOTOutput(DifferentiableAOTOutput):
    """A value the user's function returns, by position in its flattened outputs.

    ::

        out addmm       PlainAOTOutput(idx=0)    # what nn.Linear's forward returns
    """

    idx: int

    def expr(self) -> str:
        return f"output[{self.idx}]"


@_descriptor
class InputMutationAOTOutput(DifferentiableAOTOutput):
    """The new value of an input the function mutated in place.

    The functional graph cannot write into its inputs, so it returns the new value and
    the runtime copies it back (and autograd sees it)::

        InputMutationAOTOutput(mutated_input=BufferAOTInput(target='running_mean'))
    """

    mutated_input: AOTInput

    def expr(self) -> str:
        return f"__input_mutation({self.mutated_input.expr()})"


@_descriptor
class IntermediateBaseAOTOutput(DifferentiableAOTOutput):
    """A tensor returned so that outputs viewing it can be rebuilt outside the graph.

    When several outputs alias one intermediate, the graph returns their common base as an
    extra output; ``base_of`` names one of those outputs:
    ``IntermediateBaseAOTOutput(base_of=PlainAOTOutput(idx=0))``.
    """

    base_of: AOTOutput

    def expr(self) -> str:
        return f"__intermediate_base({self.base_of.expr()})"


@_descriptor
class MetadataMutationAOTOutput(DifferentiableAOTOutput):
    """An aliased input whose metadata (sizes, strides) the function changed in place.

    ``idx`` numbers such inputs; an in-place transpose (``t.t_()``) is one example:
    ``MetadataMutationAOTOutput(idx=0)``.
    """

    idx: int

    def expr(self) -> str:
        return f"__aliased_arg_with_metadata_mutation{self.idx}"


@_descriptor
class GradAOTOutput(DifferentiableAOTOutput):
    """The gradient the backward half computes for one differentiable input.

    ``grad_of`` says whose gradient it is; an input that gets no grad has ``None`` in
    its output slot instead::

        out t_3         GradAOTOutput(grad_of=ParamAOTInput(target='weight'))
    """

    grad_of: DifferentiableAOTInput

    def __post_init__(self) -> None:
        if not isinstance(self.grad_of, DifferentiableAOTInput):
            raise _wrong_kind("GradAOTOutput", "grad_of", "DifferentiableAOTInput", self.grad_of)

    def expr(self) -> str:
        return f"__grad({self.grad_of.expr()})"

    def is_grad(self) -> bool:
        return True


@_descriptor
class PhiloxUpdatedForwardOffsetAOTOutput(AOTOutput):
    """The forward's RNG offset after its random ops, returned to advance the generator.

    ``PhiloxUpdatedForwardOffsetAOTOutput()``, the end of :class:`PhiloxForwardBaseOffsetAOTInput`.
    """

    def expr(self) -> str:
        return "__philox_updated_forward_offset"


@_descriptor
class PhiloxUpdatedBackwardOffsetAOTOutput(AOTOutput):
    """The backward's RNG offset after its random ops, returned to advance the generator.

    ``PhiloxUpdatedBackwardOffsetAOTOutput()``, the end of :class:`PhiloxBackwardBaseOffsetAOTInput`.
    """

    def expr(self) -> str:
        return "__philox_updated_backward_offset"


@_descriptor
class ForwardTokenAOTOutput(AOTOutput):
    """The effect token the forward hands back, so dead-code elimination keeps its effects.

    Returning the token makes the side-effecting ops "used": ``ForwardTokenAOTOutput(idx=0)``.
    """

    idx: int

    def expr(self) -> str:
        return f"__forward_token{self.idx}"


@_descriptor
class BackwardTokenAOTOutput(AOTOutput):
    """The effect token the backward hands back, as :class:`ForwardTokenAOTOutput` does.

    ``BackwardTokenAOTOutput(idx=0)``.
    """

    idx: int

    def expr(self) -> str:
        return f"__backward_token{self.idx}"


@_descriptor
class SubclassGetAttrAOTOutput(AOTOutput):
    """One inner tensor of a tensor-subclass output (its attribute ``attr``).

    The runtime wraps these plain outputs back into the subclass:
    ``SubclassGetAttrAOTOutput(base=PlainAOTOutput(idx=0), attr='a')``.
    """

    base: AOTOutput
    attr: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def is_grad(self) -> bool:
        return self.base.is_grad()


@_descriptor
class SubclassSizeAOTOutput(AOTOutput):
    """The outer size at dimension ``idx`` of a subclass output, as a SymInt.

    Used with dynamic shapes to rebuild the subclass:
    ``SubclassSizeAOTOutput(base=PlainAOTOutput(idx=0), idx=0)``.
    """

    base: AOTOutput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.size({self.idx})"


@_descriptor
class SubclassStrideAOTOutput(AOTOutput):
    """The outer stride at dimension ``idx`` of a subclass output, as a SymInt.

    ``SubclassStrideAOTOutput(base=PlainAOTOutput(idx=0), idx=0)``.
    """

    base: AOTOutput
    idx: int

    def expr(self) -> str:
        return f"{self.base.expr()}.stride({self.idx})"


@_descriptor
class DummyAOTOutput(AOTOutput):
    """A placeholder descriptor, for code that must be handed an AOTOutput but reads none.

    Not found on an exported joint graph; ``idx`` only tells dummies apart.
    """

    idx: int

    def expr(self) -> str:
        return f"__dummy{self.idx}"


@_descriptor
class SavedForBackwardsAOTOutput(AOTOutput):
    """An activation the forward graph returns so that the backward graph can use it.

    Made by the partitioner, which splits the joint into forward and backward:
    ``SavedForBackwardsAOTOutput(idx=0)`` is the first saved value.
    """

    idx: int

    def expr(self) -> str:
        return f"__saved_for_backwards_{self.idx}"


@_descriptor
class SavedForBackwardsNoVcCheckAOTOutput(AOTOutput):
    """A saved activation that skips the version-counter check in backward.

    Like :class:`SavedForBackwardsAOTOutput`, but kept on ``ctx`` directly rather than
    through ``save_for_backward``: ``SavedForBackwardsNoVcCheckAOTOutput(idx=0)``.
    """

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
        raise ValueError(f"{cls.__name__}() is an abstract base; joint graphs only hold its subclasses")
    for field in dataclasses.fields(desc):
        value = getattr(desc, field.name)
        expected = field.type if isinstance(field.type, type) else _CLASSES[field.type]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise TypeError(
                f"{cls.__name__}.{field.name} must be {expected.__name__}, got {type(value).__name__}"
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
