"""Which torch releases the course is tested against, and a clear error outside them.

torch's AOTAutograd APIs (descriptors, fx_utils, aot_export_joint_with_descriptors)
are private and change between releases, so we pin the range we test.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

#: The torch releases the test suite runs against. Keep in step with pyproject.toml.
SUPPORTED_TORCH = SpecifierSet(">=2.13,<2.16")

#: The exact releases CI runs the tests on (.ci/run), oldest first.
TESTED_RELEASES = ("2.13.0", "2.14.1", "2.15.0")


class UnsupportedTorchError(RuntimeError):
    """Raised by a module that relies on torch internals of a release we do not support."""


def _installed_torch_version() -> Version:
    import torch

    # "2.13.0+cpu" -> 2.13.0; local labels say how it was built, not which API it has.
    return Version(Version(torch.__version__).base_version)


def torch_supported() -> bool:
    """True when the installed torch is in :data:`SUPPORTED_TORCH`."""
    return _installed_torch_version() in SUPPORTED_TORCH


def require_supported_torch(feature: str) -> None:
    """Raise :class:`UnsupportedTorchError` naming ``feature`` and the fix.

    Example:
        >>> require_supported_torch("course.aot.descriptors")  # passes on torch 2.13, 2.14 and 2.15
    """
    if torch_supported():
        return
    import torch

    raise UnsupportedTorchError(
        f"{feature} mirrors private torch internals and is tested only with torch "
        f"{SUPPORTED_TORCH}; this environment has torch {torch.__version__}. "
        f"Install a supported release, for example: {install_hint()}"
    )


def install_hint() -> str:
    """The pip command for the newest release we test, pinned exactly.

    >>> install_hint()
    'pip install torch==2.15.0'
    """
    return f"pip install torch=={TESTED_RELEASES[-1]}"
