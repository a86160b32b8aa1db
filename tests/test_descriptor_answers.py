"""Does course.checks.descriptor_answers read descriptor predictions in any spelling, and nothing else?"""

import dataclasses

import pytest
import torch._functorch._aot_autograd.descriptors as td
from hypothesis import given, settings
from hypothesis import strategies as st

import course.descriptors as cd
from course.checks.descriptor_answers import descriptor_repr, descriptor_reprs

# A few descriptors torch itself builds, from flat to nested, with their canonical reprs.
TORCH_DESCS = [
    td.ParamAOTInput("lin.weight"),
    td.BufferAOTInput("scale"),
    td.PlainAOTInput(1),
    td.TangentAOTInput(td.PlainAOTOutput(0)),
    td.GradAOTOutput(td.ParamAOTInput("w")),
    td.InputMutationAOTOutput(td.BufferAOTInput("running_mean")),
    td.SubclassGetAttrAOTInput(td.PlainAOTInput(0), "a"),
    td.PhiloxForwardSeedAOTInput(),
    td.SavedForBackwardsNoVcCheckAOTOutput(3),
]


def _spell(desc, rng, positional, quote):
    """Write ``desc`` (a torch descriptor) as source text in one of many spellings."""
    parts = []
    for f in dataclasses.fields(desc):
        value = getattr(desc, f.name)
        if isinstance(value, str):
            text = f"{quote}{value}{quote}"
        elif isinstance(value, int):
            text = str(value)
        else:
            text = _spell(value, rng, positional, quote)
        space = " " * rng.randint(0, 2)
        parts.append(text if positional else f"{f.name}{space}={space}{text}")
    pad = " " * rng.randint(0, 2)
    return f"{type(desc).__name__}({pad}{(',' + pad).join(parts)}{pad})"


@settings(max_examples=60, deadline=None)
@given(
    st.randoms(use_true_random=False),
    st.booleans(),
    st.sampled_from(["'", '"']),
    st.lists(st.sampled_from(TORCH_DESCS), min_size=1, max_size=4),
)
def test_any_spelling_reads_as_torch_prints_it(rng, positional, quote, descs):
    """Is every spelling (quotes, spaces, positional fields) read as torch's repr?"""
    spelled = [_spell(d, rng, positional, quote) for d in descs]
    assert descriptor_reprs(spelled) == [repr(d) for d in descs]


def test_objects_of_torch_and_course_read_as_their_repr():
    """Do torch's and course's descriptor objects read as their own repr, in a tuple too?"""
    objects = tuple(TORCH_DESCS) + tuple(cd.from_torch(d) for d in TORCH_DESCS)
    assert descriptor_reprs(objects) == [repr(d) for d in TORCH_DESCS] * 2


def test_module_prefix_is_accepted():
    """Is ``cd.ParamAOTInput('w')`` (a module-qualified name) read like ``ParamAOTInput('w')``?"""
    assert descriptor_repr("cd.ParamAOTInput('w')") == "ParamAOTInput(target='w')"


@pytest.mark.parametrize(
    "text",
    [
        "ParamAOTInput(target=w)",  # a name, not a string
        "ParamAOTInput(target=1)",  # wrong field type
        "PlainAOTInput('0')",  # wrong field type
        "PlainAOTInput(idx=True)",  # a bool is not an index
        "ParamAOTInput()",  # missing field
        "ParamAOTInput('a', 'b')",  # too many fields
        "ParamAOTInput(name='a')",  # unknown field
        "ParamAOTInput('a', target='a')",  # field given twice
        "NotADescriptor(idx=0)",
        "AOTInput()",  # an abstract base
        "__import__('os').system('true')",  # never evaluated
        "ParamAOTInput(target='w'",  # syntax error
        "ParamAOTInput(*['w'])",
        "",
    ],
)
def test_unreadable_text_gives_none(text):
    """Is text that is not a descriptor call with constant fields refused (None)?"""
    assert descriptor_repr(text) is None
    assert descriptor_reprs(["PlainAOTInput(0)", text]) is None


@pytest.mark.parametrize("answer", ["PlainAOTInput(0)", None, 3, {"PlainAOTInput(0)"}, [None], [object()]])
def test_not_a_list_of_descriptors_gives_none(answer):
    """Is an answer that is not a list or tuple of descriptors refused (None)?"""
    assert descriptor_reprs(answer) is None


def test_torch_refused_nesting_is_still_read():
    """A nesting torch refuses is still read (judging it is the check's job, not the reader's)."""
    with pytest.raises(AssertionError):
        td.TangentAOTInput(td.PlainAOTInput(0))
    assert (
        descriptor_repr("TangentAOTInput(PlainAOTInput(0))") == "TangentAOTInput(output=PlainAOTInput(idx=0))"
    )


def test_read_descriptors_is_the_parse_for_exercises():
    """Does read_descriptors give the canonical reprs, and a ValueError with a message otherwise?"""
    from course.checks.descriptor_answers import read_descriptors

    assert read_descriptors(['GradAOTOutput(ParamAOTInput("w"))']) == [
        "GradAOTOutput(grad_of=ParamAOTInput(target='w'))"
    ]
    with pytest.raises(ValueError, match="list of descriptors"):
        read_descriptors("PlainAOTInput(0)")
