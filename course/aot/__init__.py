"""The course's side of ``torch/_functorch/_aot_autograd/``: descriptors, fx_utils, the joint.

- :mod:`course.aot.descriptors`: every ``AOTInput`` / ``AOTOutput`` class;
- :mod:`course.aot.fx_utils`: the nine ``get_*`` functions over a joint graph;
- :mod:`course.aot.steps`: one function per stage of the export (trace, functionalize,
  tangents, joint, descriptors, partition);
- :mod:`course.aot.stage`: a stage's snapshot and the lazy builder of the teaching stages;
- :mod:`course.aot.joint`: ``export_joint``, the course's ``aot_export_joint_with_descriptors``;
- :mod:`course.aot.printing`: the deterministic printout of a joint graph's inputs and outputs.

The public paths stay ``course.descriptors``, ``course.fx_utils`` and ``course.joint``.

What is ours and what is torch's: descriptors and fx_utils are plain-Python
re-implementations of torch's plain-Python modules (same names, reprs and results). The
staged builder is ours, assembled from torch's tracing (``make_fx``), functionalization
and partitioner, and is checked against ``aot_export_joint_with_descriptors``.
"""
