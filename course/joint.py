"""Public face of :mod:`course.aot.joint` (kept at this path: lessons and tests import it).

``course.joint.export_joint(module, args)`` is the course's
``aot_export_joint_with_descriptors``; the staged builder behind it, and which parts of it are
ours and which torch's, live in :mod:`course.aot.joint`.
"""

from course.aot.joint import (
    JointWithDescriptors,
    Stage,
    export_joint,
)

__all__ = [
    "JointWithDescriptors",
    "Stage",
    "export_joint",
]
