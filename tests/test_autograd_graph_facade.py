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
    "node_creation_hook": "course.autograd.creation",  # torch 2.14's; ours on 2.13 too
    "queue_callback": "course.autograd.callbacks",  # torch 2.15's; ours on 2.13 and 2.14 too
}
ON_INSTALLED_TORCH = sorted(name for name in EXPECTED if hasattr(TG, name))


def test_is_all_exactly_the_course_surface():
    assert sorted(A.__all__) == sorted(set(EXPECTED) | set(A.REEXPORTED_FROM_TORCH))


def test_does_every_public_name_of_the_installed_torch_have_a_counterpart():
    """torch.autograd.graph.__all__ (2.13, 2.14 or 2.15): each ours, or torch's with a reason?"""
    missing = set(TG.__all__) - set(A.__all__)
    assert not missing, f"torch {torch.__version__} has names the facade lacks: {sorted(missing)}"
    for name in TG.__all__:
        assert name in EXPECTED or name in A.REEXPORTED_FROM_TORCH


@pytest.mark.parametrize("name", sorted(A.REEXPORTED_FROM_TORCH))
def test_is_each_reexport_torchs_own_object_with_a_one_line_reason(name):
    assert getattr(A, name) is getattr(TG, name)
    reason = A.REEXPORTED_FROM_TORCH[name]
    assert reason.strip() and "\n" not in reason
    assert name not in EXPECTED


def test_does_node_creation_hook_exist_in_torch_only_from_214():
    from packaging.version import Version

    assert hasattr(TG, "node_creation_hook") == (Version(torch.__version__).release >= (2, 14))


def test_does_queue_callback_exist_in_torch_only_from_215():
    from packaging.version import Version

    assert hasattr(TG, "queue_callback") == (Version(torch.__version__).release >= (2, 15))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_does_each_name_come_from_its_lesson_module(name):
    obj = getattr(A, name)
    assert obj.__module__ == EXPECTED[name]
    assert obj is not getattr(TG, name, None), "the facade must not re-export torch's own object"


def shape(obj):
    """A signature without annotations: names, kinds and defaults of the parameters."""
    sig = inspect.signature(obj)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("name", ON_INSTALLED_TORCH)
def test_does_each_signature_match_torchs(name):
    # Annotations are compared by name only: ours are strings (PEP 563) naming course types.
    assert shape(getattr(A, name)) == shape(getattr(TG, name))
    ours, theirs = inspect.signature(getattr(A, name)), inspect.signature(getattr(TG, name))
    assert (ours.return_annotation is inspect.Signature.empty) == (
        theirs.return_annotation is inspect.Signature.empty
    )


def test_are_the_classes_compatible_with_torchs():
    a = torch.ones(2, requires_grad=True)
    edge = A.get_gradient_edge(a * 2)
    assert isinstance(edge, TG.GradientEdge) and isinstance(edge.node, A.Node)
    assert A.GradientEdge._fields == TG.GradientEdge._fields
    assert A.Node.__abstractmethods__ == TG.Node.__abstractmethods__
