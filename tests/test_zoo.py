"""The descriptor zoo of lesson 07: does each program make what the lesson says, in torch and in course?

Each ``ZOO`` program (course/content/zoo.py) runs through torch; its descriptors must
contain the classes the lesson says it shows, and ``from_torch`` must give equal course
descriptors. Where ``course.joint`` builds the program, its descriptors equal torch's; where
it does not, it raises ``NotImplementedError`` naming the case.
"""

import dataclasses
import pathlib
import re

import pytest
import torch

import course.descriptors as cd
from course.content.zoo import ZOO, course_descriptors, inner_sizes, torch_descriptors, zoo_classes

BY_TORCH = [name for name, p in ZOO.items() if p.via in ("export", "compile")]

#: Programs course.joint does not build, and a word its refusal must name.
REFUSED = {
    "aliased_inputs": "ViewBaseAOTInput",
    "detached_aliases": "SyntheticBaseAOTInput",
    "aliased_transpose_": "MetadataMutationAOTOutput",
    "two_views": "IntermediateBaseAOTOutput",
    "two_tensor": "SubclassGetAttrAOTInput",
    "two_tensor_symbolic": "SubclassGetAttrAOTInput",
    "print_forward": "ForwardTokenAOTInput",
    "print_backward": "BackwardTokenAOTInput",
    "dropout_rng": "PhiloxForwardSeedAOTInput",
}
#: Programs where course.joint and torch differ on purpose (see course/aot/joint.py).
DIFFERS = {"stash_on_ctx"}
BUILT = [n for n in BY_TORCH if n not in REFUSED and n not in DIFFERS]


def _reprs(descs):
    return [repr(d) for d in descs]


def test_every_concrete_class_has_a_place_in_the_zoo():
    """Is each of the 31 concrete descriptor classes shown by some zoo program?"""
    bases = {"AOTInput", "AOTOutput", "DifferentiableAOTInput", "DifferentiableAOTOutput"}
    concrete = {
        n
        for n, c in vars(cd).items()
        if isinstance(c, type)
        and dataclasses.is_dataclass(c)
        and n.endswith(("AOTInput", "AOTOutput"))
        and n not in bases
    }
    shown = {c for p in ZOO.values() for c in p.shows}
    assert len(concrete) == 31 and concrete <= shown, sorted(concrete - shown)


@pytest.mark.parametrize("name", BY_TORCH)
def test_torch_makes_what_the_zoo_shows(name):
    """Does torch's own export (or partitioner) make every class the program is there to show,
    and does from_torch give equal course descriptors?"""
    inputs, outputs = torch_descriptors(name)
    descs = [*inputs, *outputs]
    assert set(ZOO[name].shows) <= set(zoo_classes(descs))
    ours = [None if d is None else cd.from_torch(d) for d in descs]
    assert _reprs(ours) == _reprs(descs)
    assert all(o == d for o, d in zip(ours, descs) if d is not None)  # course == torch, both ways
    assert all(d == o for o, d in zip(ours, descs) if d is not None)


@pytest.mark.parametrize("name", BUILT)
def test_course_joint_makes_the_same_descriptors(name):
    """Where course.joint builds the program, are its descriptors torch's, in torch's order?"""
    assert [_reprs(x) for x in course_descriptors(name)] == [_reprs(x) for x in torch_descriptors(name)]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_course_joint_refuses_what_it_does_not_build(name):
    """Does course.joint refuse with NotImplementedError naming the case (never a wrong graph)?"""
    with pytest.raises(NotImplementedError, match=REFUSED[name]):
        course_descriptors(name)


def test_stash_on_ctx_is_version_checked_by_course():
    """torch.compile marks a ctx-stashed tensor NoVcCheck (dynamo sees the Function); course.joint
    traces through the Function, as torch's export does, and saves it as a plain saved value."""
    _, torch_outs = torch_descriptors("stash_on_ctx")
    _, course_outs = course_descriptors("stash_on_ctx")
    assert _reprs(torch_outs) == ["PlainAOTOutput(idx=0)", "SavedForBackwardsNoVcCheckAOTOutput(idx=0)"]
    assert _reprs(course_outs) == ["PlainAOTOutput(idx=0)", "SavedForBackwardsAOTOutput(idx=0)"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU refusal")
def test_rng_functionalization_needs_cuda():
    """On a CPU-only torch, is the Philox program refused (so the lesson builds it by hand)?"""
    with pytest.raises(RuntimeError):
        torch_descriptors("dropout_rng")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Philox seeds need a CUDA device")
def test_rng_functionalization_on_cuda_matches_the_hand_built_list():
    """On CUDA, does torch make exactly the Philox descriptors the lesson builds by hand?"""
    inputs, outputs = torch_descriptors("dropout_rng")
    assert _reprs([d for d in (*inputs, *outputs) if d is not None]) == _reprs(ZOO["dropout_rng"].hand)


def test_hand_built_descriptors_are_legal():
    """Are the hand-built descriptors of the zoo legal nestings (course.descriptors.validate)?"""
    for p in ZOO.values():
        for d in p.hand:
            cd.validate(d)
        assert set(p.shows) <= set(zoo_classes(p.hand)) or p.via not in ("hand", "cuda")


def test_dummy_descriptors_are_never_in_a_graph():
    """The lesson's claim: in torch's own Python, DummyAOTOutput is built nowhere, and
    DummyAOTInput only where no descriptor is at hand (a runtime re-merge, a discarded unwrap)."""
    root = pathlib.Path(torch.__file__).parent / "_functorch"
    made = {"DummyAOTInput": set(), "DummyAOTOutput": set()}
    for path in root.rglob("*.py"):
        if path.name == "descriptors.py":
            continue
        text = path.read_text()
        for name in made:
            if re.search(rf"\b{name}\(", text):
                made[name].add(path.name)
    assert made == {"DummyAOTInput": {"runtime_wrappers.py", "subclass_utils.py"}, "DummyAOTOutput": set()}


@pytest.mark.parametrize("name", BY_TORCH)
def test_only_the_symbolic_subclass_passes_inner_sizes_and_only_from_torch_2_14(name):
    """Does torch pass inner tensors' sizes and strides where lesson 07 says (18 on 2.14 and 2.15, none on 2.13)?"""
    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    ins, outs = torch_descriptors(name)
    inner = inner_sizes(ins) + inner_sizes(outs)
    expected = {(2, 13): 0, (2, 14): 18, (2, 15): 18}[release] if name == "two_tensor_symbolic" else 0
    assert len(inner) == expected
    # what the lesson prints without them still shows every class the program is there for
    rest = [d for d in [*ins, *outs] if d is not None and d not in inner]
    assert set(ZOO[name].shows) <= set(zoo_classes(rest))
