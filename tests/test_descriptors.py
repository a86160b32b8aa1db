"""Are course.aot.descriptors' classes torch's, value for value?

Torch is the oracle: we enumerate torch 2.13's descriptor classes programmatically, build
instances (one per class, nested ones, and Hypothesis-generated trees) with torch, and check
that course's counterparts print, compare, hash and answer ``expr()`` / ``is_*()`` the same,
and that ``from_torch`` / ``to_torch`` round-trip.
"""

import dataclasses
import importlib
import inspect
import re
import typing

import pytest
import torch._functorch._aot_autograd.descriptors as T
from corpus import CASES, torch_joint
from hypothesis import given, settings
from hypothesis import strategies as st

from course import SUPPORTED_TORCH, UnsupportedTorchError
from course.aot import descriptors as C

pytestmark = pytest.mark.lesson07

TORCH_CLASSES = {
    name: cls
    for name, cls in vars(T).items()
    if inspect.isclass(cls) and cls.__module__ == T.__name__ and issubclass(cls, (T.AOTInput, T.AOTOutput))
}
METHODS = ("expr", "is_param", "is_buffer", "is_tangent", "is_grad", "__post_init__")


def field_types(cls) -> dict[str, type]:
    """Field name -> type, with torch's string annotation ("AOTOutput") resolved."""
    module = importlib.import_module(cls.__module__)
    return {
        f.name: getattr(module, f.type) if isinstance(f.type, str) else f.type
        for f in dataclasses.fields(cls)
    }


# ---- the classes -------------------------------------------------------------------------


def _course_classes() -> dict[str, type]:
    """The descriptor classes the course exports, by name."""
    return {n: getattr(C, n) for n in C.__all__ if isinstance(getattr(C, n), type)}


def test_every_torch_class_has_a_course_counterpart():
    """Same 35 names, each exported, and no extra descriptor classes of our own?"""
    assert len(TORCH_CLASSES) == 35
    assert set(_course_classes()) == set(TORCH_CLASSES)
    assert set(TORCH_CLASSES) <= set(C.__all__)


@pytest.mark.parametrize("name", sorted(TORCH_CLASSES))
def test_class_shape_matches_torch(name):
    """Frozen dataclass, same bases, fields, field types and methods as torch's?"""
    ours, theirs = getattr(C, name), TORCH_CLASSES[name]
    assert ours.__dataclass_params__.frozen and theirs.__dataclass_params__.frozen
    assert [b.__name__ for b in ours.__mro__] == [b.__name__ for b in theirs.__mro__]
    assert {k: t.__name__ for k, t in field_types(ours).items()} == {
        k: t.__name__ for k, t in field_types(theirs).items()
    }
    assert [m for m in METHODS if m in vars(ours)] == [m for m in METHODS if m in vars(theirs)]


# ---- instances: one per class, then nested ones ------------------------------------------


def sample(cls):
    """One torch instance of ``cls`` with simple field values."""
    values = {
        int: 1,
        str: "w",
        T.DifferentiableAOTInput: T.PlainAOTInput(0),
        T.AOTInput: T.BufferAOTInput("b"),
    }
    values |= {T.DifferentiableAOTOutput: T.PlainAOTOutput(2), T.AOTOutput: T.DummyAOTOutput(3)}
    return cls(**{k: values[t] for k, t in field_types(cls).items()})


NESTED = [
    T.SubclassGetAttrAOTInput(T.TangentAOTInput(T.PlainAOTOutput(0)), "a"),
    T.SubclassGetAttrAOTOutput(T.GradAOTOutput(T.ViewBaseAOTInput(T.PlainAOTInput(1))), "b"),
    T.SubclassSizeAOTInput(T.SubclassGetAttrAOTInput(T.ParamAOTInput("w"), "a"), 0),
    T.SubclassStrideAOTOutput(T.SubclassGetAttrAOTOutput(T.PlainAOTOutput(0), "a"), 1),
    T.TangentAOTInput(T.InputMutationAOTOutput(T.SyntheticBaseAOTInput(T.PlainAOTInput(0)))),
    T.TangentAOTInput(T.IntermediateBaseAOTOutput(T.PlainAOTOutput(1))),
    T.GradAOTOutput(T.BufferAOTInput("running_mean")),
    T.SubclassGetAttrAOTInput(T.SubclassGetAttrAOTInput(T.PlainAOTInput(0), "a"), "b"),
]
INSTANCES = [sample(cls) for _, cls in sorted(TORCH_CLASSES.items())] + NESTED


def call(desc, method):
    """desc.method() or the exception type and message it raises."""
    try:
        return getattr(desc, method)()
    except Exception as e:  # the bases raise NotImplementedError from expr()
        return type(e), str(e)


def assert_same_value(ours, theirs):
    assert type(ours).__module__ == "course.aot.descriptors"
    assert type(ours).__name__ == type(theirs).__name__
    assert repr(ours) == repr(theirs)
    assert hash(ours) == hash(theirs)
    for method in ("expr", "is_param", "is_buffer", "is_tangent", "is_grad"):
        assert hasattr(ours, method) == hasattr(theirs, method)
        if hasattr(theirs, method):
            assert call(ours, method) == call(theirs, method)


@pytest.mark.parametrize("desc", INSTANCES, ids=repr)
def test_round_trip(desc):
    """from_torch gives an equal-valued course descriptor, and to_torch gives back torch's?"""
    ours = C.from_torch(desc)
    assert_same_value(ours, desc)
    back = C.to_torch(ours)
    assert back == desc and type(back) is type(desc)
    assert C.from_torch(ours) is ours and C.to_torch(desc) is desc  # already converted


@pytest.mark.parametrize("desc", INSTANCES, ids=repr)
def test_frozen_like_torch(desc):
    """Assigning a field raises FrozenInstanceError on both sides?"""
    for d in (desc, C.from_torch(desc)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            d.idx = 5


# ---- Hypothesis: trees of torch descriptors ----------------------------------------------


def _field(tp):
    """Values for a field of type ``tp``: small domains, so equal trees turn up often."""
    if tp is int:
        return st.integers(0, 2)
    if tp is str:
        return st.sampled_from(["a", "weight"])
    pool = inputs if issubclass(tp, T.AOTInput) else outputs
    return pool.filter(lambda d: isinstance(d, tp))


def _is_leaf(cls):
    return all(t in (int, str) for t in field_types(cls).values())


def _pool(base):
    """Every torch class under ``base``, leaves first (so Hypothesis shrinks to small trees)."""
    classes = sorted(
        (c for c in TORCH_CLASSES.values() if issubclass(c, base)), key=lambda c: not _is_leaf(c)
    )
    return st.deferred(
        lambda: st.one_of(
            *[st.builds(c, **{k: _field(t) for k, t in field_types(c).items()}) for c in classes]
        )
    )


inputs = _pool(T.AOTInput)
outputs = _pool(T.AOTOutput)
descriptors = st.one_of(inputs, outputs)


@settings(max_examples=50, deadline=None)
@given(desc=descriptors)
def test_generated_descriptors_round_trip(desc):
    """Any torch descriptor tree: same repr, hash, expr and is_* once converted, and back?"""
    ours = C.from_torch(desc)
    assert_same_value(ours, desc)
    assert C.to_torch(ours) == desc


@settings(max_examples=50, deadline=None)
@given(a=descriptors, b=descriptors, same=st.booleans())
def test_equality_and_hash_agree_with_torch(a, b, same):
    """course eq iff torch eq, and equal course descriptors hash equal?"""
    if same:
        b = C.to_torch(C.from_torch(a))  # an equal but distinct object
    ours_a, ours_b = C.from_torch(a), C.from_torch(b)
    assert (ours_a == ours_b) == (a == b)
    if ours_a == ours_b:
        assert hash(ours_a) == hash(ours_b)
    assert ours_a == a and a == ours_a  # a course descriptor equals its torch twin, both ways
    assert hash(ours_a) == hash(a)


@settings(max_examples=50, deadline=None)
@given(desc=descriptors)
def test_validate_treats_torch_and_course_alike(desc):
    """validate gives the same verdict (and message) for a torch descriptor and its copy?"""
    verdicts = []
    for d in (desc, C.from_torch(desc)):
        try:
            verdicts.append(C.validate(d) is d)
        except ValueError as e:
            verdicts.append(str(e))
    assert verdicts[0] == verdicts[1]


# Legal descriptors, built the way AOTAutograd's pipeline builds them (course classes).
_idx, _name = st.integers(0, 2), st.sampled_from(["a", "weight"])
plain_in = st.one_of(
    st.builds(C.PlainAOTInput, _idx), st.builds(C.ParamAOTInput, _name), st.builds(C.BufferAOTInput, _name)
)
views_in = st.recursive(
    plain_in,
    lambda d: st.one_of(st.builds(C.ViewBaseAOTInput, d), st.builds(C.SyntheticBaseAOTInput, d)),
    max_leaves=3,
)
views_out = st.one_of(
    st.builds(C.PlainAOTOutput, _idx),
    st.builds(C.MetadataMutationAOTOutput, _idx),
    st.builds(C.InputMutationAOTOutput, views_in),
    st.builds(C.IntermediateBaseAOTOutput, st.builds(C.PlainAOTOutput, _idx)),
)
autograd_in = st.builds(C.TangentAOTInput, views_out)
autograd_out = st.builds(C.GradAOTOutput, views_in)
subclass_in = st.recursive(
    st.one_of(views_in, autograd_in),
    lambda d: st.one_of(
        st.builds(C.SubclassGetAttrAOTInput, d, _name), st.builds(C.SubclassSizeAOTInput, d, _idx)
    ),
    max_leaves=3,
)
subclass_out = st.recursive(
    st.one_of(views_out, autograd_out),
    lambda d: st.one_of(
        st.builds(C.SubclassGetAttrAOTOutput, d, _name), st.builds(C.SubclassStrideAOTOutput, d, _idx)
    ),
    max_leaves=3,
)


@settings(max_examples=50, deadline=None)
@given(desc=st.one_of(subclass_in, subclass_out))
def test_pipeline_built_descriptors_are_valid(desc):
    """Anything built in pipeline order (plain, views, autograd, subclasses) validates?"""
    assert C.validate(desc) is desc and C.validate(C.to_torch(desc)) is not None


@settings(max_examples=50, deadline=None)
@given(tangent=autograd_in, grad=autograd_out, sub_in=subclass_in, sub_out=subclass_out)
def test_out_of_order_wrappers_are_rejected(tangent, grad, sub_in, sub_out):
    """Autograd of autograd, and views or autograd around subclass pieces, are all rejected?"""
    with pytest.raises(ValueError, match="double backward"):
        C.validate(C.GradAOTOutput(tangent))
    with pytest.raises(ValueError, match="double backward"):
        C.validate(C.TangentAOTInput(grad))
    if isinstance(sub_in, C.SubclassGetAttrAOTInput | C.SubclassSizeAOTInput):
        with pytest.raises(ValueError, match="stage 4, subclasses"):
            C.validate(C.ViewBaseAOTInput(sub_in))
    if isinstance(sub_out, C.SubclassGetAttrAOTOutput | C.SubclassStrideAOTOutput):
        with pytest.raises(ValueError, match="stage 4, subclasses"):
            C.validate(C.IntermediateBaseAOTOutput(sub_out))


# ---- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "bad"),
    [
        ("TangentAOTInput", T.PlainAOTInput(0)),
        ("TangentAOTInput", T.SubclassGetAttrAOTOutput(T.PlainAOTOutput(0), "a")),
        ("GradAOTOutput", T.SubclassGetAttrAOTInput(T.PlainAOTInput(0), "a")),
        ("GradAOTOutput", T.ForwardTokenAOTInput(0)),
    ],
)
def test_wrong_kind_is_an_assertion_error_like_torch(cls, bad):
    """Constructor rejects a non-differentiable argument: same type, torch's text first?"""
    with pytest.raises(AssertionError) as theirs:
        getattr(T, cls)(bad)
    with pytest.raises(AssertionError) as ours:
        getattr(C, cls)(C.from_torch(bad))
    assert str(ours.value).startswith(str(theirs.value).replace(T.__name__, C.__name__))
    assert "autograd stage" in str(ours.value) and "subclass" in str(ours.value)


def test_not_a_descriptor_is_a_type_error():
    """from_torch / to_torch on a non-descriptor: TypeError naming the type?"""
    with pytest.raises(TypeError, match="from_torch expects an AOTInput or AOTOutput, got int"):
        C.from_torch(3)
    with pytest.raises(TypeError, match="to_torch expects an AOTInput or AOTOutput, got str"):
        C.to_torch("PlainAOTInput(idx=0)")


def test_unknown_torch_class_names_it_and_the_supported_range():
    """A descriptor class torch 2.13 does not have: error with its name and our range?"""

    @dataclasses.dataclass(frozen=True)
    class FutureAOTOutput(T.AOTOutput):
        idx: int

    @dataclasses.dataclass(frozen=True)
    class PlainAOTInput(T.PlainAOTInput):  # a torch subclass that reuses a known name
        pass

    for desc in (FutureAOTOutput(0), T.GradAOTOutput(PlainAOTInput(0))):
        with pytest.raises(UnsupportedTorchError) as err:
            C.from_torch(desc)
        assert "test_descriptors" in str(err.value) and str(SUPPORTED_TORCH) in str(err.value)


def test_unknown_course_subclass_cannot_go_to_torch():
    @dataclasses.dataclass(frozen=True)
    class MyAOTInput(C.AOTInput):
        pass

    with pytest.raises(UnsupportedTorchError, match="MyAOTInput"):
        C.to_torch(MyAOTInput())


# ---- validate: the pipeline order --------------------------------------------------------


def docstring_examples(tag):
    """The ``# OK`` / ``# BAD`` lines of course.aot.descriptors' docstring, as expressions."""
    return [m.group(1).strip() for m in re.finditer(rf"^\s+(\w+\(.*\))\s+# {tag}\b", C.__doc__, re.M)]


def test_docstring_has_both_kinds_of_examples():
    assert len(docstring_examples("OK")) >= 3 and len(docstring_examples("BAD")) >= 4


@pytest.mark.parametrize("expr", docstring_examples("OK"))
def test_docstring_ok_lines_validate(expr):
    """Every ``# OK`` line of the module docstring passes validate, for torch's classes too?"""
    desc = eval(expr, vars(C))
    assert C.validate(desc) is desc
    assert C.validate(C.to_torch(desc)) is not None


@pytest.mark.parametrize("expr", docstring_examples("BAD"))
def test_docstring_bad_lines_are_rejected(expr):
    """Every ``# BAD`` line is rejected (constructor or validate) with the pipeline explained?"""
    with pytest.raises((ValueError, AssertionError)) as err:
        C.validate(eval(expr, vars(C)))
    message = str(err.value)
    assert "stage" in message and ("order" in message or "double backward" in message or "before" in message)


def test_tangent_of_a_subclass_output_explains_the_order():
    with pytest.raises(
        AssertionError, match="autograd stage, which runs after views/mutations and before subclasses"
    ):
        C.TangentAOTInput(C.SubclassGetAttrAOTOutput(C.PlainAOTOutput(0), "a"))


@pytest.mark.parametrize(
    ("desc", "message"),
    [
        (C.TangentAOTInput(C.GradAOTOutput(C.PlainAOTInput(0))), "double backward"),
        (C.GradAOTOutput(C.TangentAOTInput(C.PlainAOTOutput(0))), "double backward"),
        (C.IntermediateBaseAOTOutput(C.GradAOTOutput(C.PlainAOTInput(0))), r"stage 2.*stage 3"),
        (C.SubclassGetAttrAOTInput(C.ForwardTokenAOTInput(0), "a"), r"stage 4.*stage 5, tokens"),
        (C.SubclassGetAttrAOTInput(C.AOTInput(), "a"), "abstract base"),
        (C.DifferentiableAOTOutput(), "abstract base"),
    ],
    ids=repr,
)
def test_validate_rejects_illegal_nestings(desc, message):
    with pytest.raises(ValueError, match=message):
        C.validate(desc)


@pytest.mark.parametrize(
    "desc",
    [
        C.PlainAOTInput("0"),
        C.PlainAOTInput(True),
        C.ParamAOTInput(3),
        C.InputMutationAOTOutput(C.PlainAOTOutput(0)),
    ],
    ids=repr,
)
def test_validate_rejects_wrong_field_types(desc):
    with pytest.raises(TypeError, match="must be"):
        C.validate(desc)


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_every_descriptor_torch_makes_is_valid(case):
    """The descriptors on torch's real joint graphs all satisfy our pipeline rule?"""
    graph = torch_joint(case).graph
    descs = [n.meta["desc"] for n in graph.find_nodes(op="placeholder")]
    descs += [d for d in graph.output_node().meta["desc"] if d is not None]
    assert descs and all(C.validate(d) is d for d in descs)


# ---- the docstring examples run ----------------------------------------------------------


def test_typing_names_resolve():
    """Our field annotations resolve to our own classes (so a learner's IDE follows them)."""
    for cls in _course_classes().values():
        for hint in typing.get_type_hints(cls).values():
            assert hint in (int, str) or hint.__module__ == "course.aot.descriptors"


# ---- validate, with torch as the oracle --------------------------------------------------
# validate is the course's own rule; its oracle is what torch really builds: every descriptor
# torch's aot_export_joint_with_descriptors puts on a corpus graph must pass it unchanged.

from corpus import CASES  # noqa: E402  (pytest puts tests/ on sys.path)


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_every_descriptor_torch_exports_validates(name):
    descs = [n.meta["desc"] for n in torch_joint(name).graph.nodes if "desc" in n.meta]
    flat = [
        d for desc in descs for d in (desc if isinstance(desc, (list, tuple)) else [desc]) if d is not None
    ]
    assert flat, name
    for desc in flat:
        assert C.validate(desc) is desc
