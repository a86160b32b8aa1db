"""The course's ``torch.autograd.graph``: every public name, from the lesson that builds it.

Read it side by side with torch's module; the names and signatures are the same::

    torch.autograd.graph.get_gradient_edge(t)      # torch's
    course.autograd_graph.get_gradient_edge(t)     # ours, from course/autograd/graph.py

Where each name is built (lesson, module):

1. ``course.autograd.graph``: ``Node``, ``GradientEdge``, ``get_gradient_edge``, ``increment_version``
2. ``course.autograd.hooks``: ``register_multi_grad_hook``, ``_register_logging_hooks_on_whole_graph``,
   ``_engine_run_backward``
2. ``course.autograd.creation``: ``node_creation_hook`` (torch 2.14's; ours also runs on 2.13)
2. ``course.autograd.callbacks``: ``queue_callback`` (torch 2.15's; ours also runs on 2.13 and 2.14)
3. ``course.autograd.saved_tensors``: ``saved_tensors_hooks``, ``save_on_cpu``,
   ``disable_saved_tensors_hooks``
5. ``course.autograd.mutation``: ``allow_mutation_on_saved_tensors``

Example:
    >>> import torch
    >>> from course import autograd_graph
    >>> a = torch.ones(2, requires_grad=True)
    >>> autograd_graph.get_gradient_edge(a * 2)
    GradientEdge(MulBackward0, output_nr=0)

Which parts are ours and which are torch's is said once, in :mod:`course.autograd` (for the
layer) and in each module named above (for its names, with how ours differs from torch).

torch's own objects, re-exported unchanged (:data:`REEXPORTED_FROM_TORCH` gives the reason
for each): ``region_activation_memory_budget``, ``set_warn_on_accumulate_grad_stream_mismatch``,
``set_override_stale_capture_stream``.
"""

from torch.autograd.graph import (
    region_activation_memory_budget,
    set_override_stale_capture_stream,
    set_warn_on_accumulate_grad_stream_mismatch,
)

from course.autograd.callbacks import queue_callback
from course.autograd.creation import node_creation_hook
from course.autograd.graph import GradientEdge, Node, get_gradient_edge, increment_version
from course.autograd.hooks import (
    _engine_run_backward,
    _register_logging_hooks_on_whole_graph,
    register_multi_grad_hook,
)
from course.autograd.mutation import allow_mutation_on_saved_tensors
from course.autograd.saved_tensors import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks

__all__ = [
    "GradientEdge",
    "Node",
    "_engine_run_backward",
    "_register_logging_hooks_on_whole_graph",
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "get_gradient_edge",
    "increment_version",
    "node_creation_hook",
    "queue_callback",
    "region_activation_memory_budget",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
    "set_override_stale_capture_stream",
    "set_warn_on_accumulate_grad_stream_mismatch",
]

#: torch's objects we pass on as they are, and why we do not re-write them.
REEXPORTED_FROM_TORCH = {
    "region_activation_memory_budget": "a setting read by torch.compile's partitioner, which we do "
    "not re-write; the memory-policies lesson teaches it with torch's own",
    "set_warn_on_accumulate_grad_stream_mismatch": "a CUDA stream switch inside torch's C++ "
    "AccumulateGrad; nothing in Python to re-write, and the lessons run on the CPU",
    "set_override_stale_capture_stream": "a CUDA-graph capture switch inside torch's C++ engine; "
    "nothing in Python to re-write, and the lessons run on the CPU",
}
