"""A course on PyTorch autograd internals.

The package holds readable re-implementations of torch's autograd Python layer
(``course.autograd_graph``), of AOTAutograd's descriptors and fx_utils
(``course.aot.descriptors``, ``course.aot.fx_utils``), a staged joint-graph builder
(``course.aot.joint``), an activation offloader (``course.offload.offloader``) and the
machinery that turns lessons into learner notebooks and grades them.

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
