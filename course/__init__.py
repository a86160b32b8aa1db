"""A course on PyTorch autograd internals.

What is ours and what is torch's: layer by layer (each package's docstring says more),

- ``course.autograd_graph`` (``course/autograd/``): torch's engine, graph nodes, hook
  stacks and version counters are its C++; our modules are annotated copies of torch's
  thin Python layer over them (``torch/autograd/graph.py``), making the same calls into
  ``torch._C``. Only the bookkeeping of ``register_multi_grad_hook`` and of
  ``allow_mutation_on_saved_tensors`` is re-written, and the reprs are ours.
- ``course.descriptors`` and ``course.fx_utils`` (``course/aot/``): re-implementations in
  plain Python of AOTAutograd's descriptor classes and its nine ``get_*`` functions, which
  are plain Python in torch too; same names, fields, reprs and results.
- ``course.joint`` (``course/aot/``): a small joint-graph builder of our own, in named
  stages; it traces with torch's ``make_fx`` and functionalization and partitions with
  torch's partitioner, and we check its graphs against ``aot_export_joint_with_descriptors``.
- ``course.offload``: an activation offloader, its timing model and benchmark, ours,
  built on the saved-tensor hooks of ``course.autograd_graph`` (torch's C++ hook stack).
- ``course.show``, ``course.checks``, ``course.grading`` and the ``course`` command: the
  teaching and course machinery, ours.

Every explanation (docstrings, comments, messages) is in our own words; where an error
message must equal torch's (tests compare them) a comment next to it says so.

Import the submodule you need; importing ``course`` itself is cheap.
"""

from course._torch_version import (
    SUPPORTED_TORCH,
    UnsupportedTorchError,
    require_supported_torch,
    torch_supported,
)

__version__ = "0.1.0"

__all__ = [
    "SUPPORTED_TORCH",
    "UnsupportedTorchError",
    "__version__",
    "require_supported_torch",
    "torch_supported",
]
