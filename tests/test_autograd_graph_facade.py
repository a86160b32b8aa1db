"""Does course.autograd_graph offer torch.autograd.graph's names with torch's signatures?"""

import inspect

import pytest
import torch
import torch.autograd.graph as TG

import course.autograd_graph as A

pytestmark = [pytest.mark.lesson01, pytest.mark.lesson02]

EXPECTED = {
    "Node": "course.autograd.graph",
    "GradientEdge": "course.autograd.graph",
    "get_gradient_edge": "course.autograd.graph",
    "increment_version": "course.autograd.graph",
    "register_multi_grad_hook": "course.autograd.hooks",
    "_register_logging_hooks_on_whole_graph": "course.autograd.hooks",
    "_engine_run_backward": "course.autograd.hooks",
    "saved_tensors_hooks": "course.autograd.saved_tensors",
    "save_on_cpu": "course.autograd.saved_tensors",
    "disable_saved_tensors_hooks": "course.autograd.saved_tensors",
    "allow_mutation_on_saved_tensors": "course.autograd.mutation",
}
# torch's prototype extras that the course leaves out (see the facade's docstring).
NOT_COVERED = {
    "region_activation_memory_budget",
    "set_warn_on_accumulate_grad_stream_mismatch",
    "set_override_stale_capture_stream",
}


def test_is_all_exactly_the_course_surface():
    assert sorted(A.__all__) == sorted(EXPECTED)
    assert set(TG.__all__) - NOT_COVERED <= set(A.__all__)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_does_each_name_come_from_its_lesson_module(name):
    obj = getattr(A, name)
    assert obj.__module__ == EXPECTED[name]
    assert obj is not getattr(TG, name), "the facade must not re-export torch's own object"


def shape(obj):
    """A signature without annotations: names, kinds and defaults of the parameters."""
    sig = inspect.signature(obj)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_does_each_signature_match_torchs(name):
    # Annotations are compared by name only: ours are strings (PEP 563) naming course types.
    assert shape(getattr(A, name)) == shape(getattr(TG, name))
    ours, theirs = inspect.signature(getattr(A, name)), inspect.signature(getattr(TG, name))
    assert (ours.return_annotation is inspect.Signature.empty) == (theirs.return_annotation is inspect.Signature.empty)


def test_are_the_classes_compatible_with_torchs():
    a = torch.ones(2, requires_grad=True)
    edge = A.get_gradient_edge(a * 2)
    assert isinstance(edge, TG.GradientEdge) and isinstance(edge.node, A.Node)
    assert A.GradientEdge._fields == TG.GradientEdge._fields
    assert A.Node.__abstractmethods__ == TG.Node.__abstractmethods__
