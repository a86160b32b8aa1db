"""What the lessons run: the programs, models and settings each lesson's notebook imports.

One module per lesson (:mod:`course.content.lessonNN`), beside the lesson list in
``course/lessons.py``, plus :mod:`course.content.zoo` (which program gives which descriptor,
lessons 06-07) and :mod:`course.content.op_level_sac` (torchtitan's op-level selective
checkpointing on an attention block, eager and compiled, lesson 10).
A notebook imports its demonstrations from here; the checks import the same programs, so a
notebook runs exactly what its exercise's check judges. What judges an answer (truths,
oracles, hidden cases, known wrong answers) lives in ``course/checks/lessonNN/`` and never
here: a lesson's content can be read without meeting the answers to its exercises.

Content imports the reference layer (``course.autograd``, ``course.aot``, ``course.offload``)
and torch, never ``course.checks`` or ``course.grading`` (tests/test_structure.py).
"""

__all__: list[str] = []
