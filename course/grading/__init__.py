"""The course's machinery: learner copies, grading, progress and the learner's workspace.

- :mod:`course.grading.assign`: generate ``notebooks/`` from ``solutions/``;
- :mod:`course.grading.grade`: ``course grade``, the judge that scores a notebook;
- :mod:`course.grading.kernel`: run a notebook in a fresh kernel (grading and ``assign --execute``);
- :mod:`course.grading.worker`: run one exercise's answer in a fresh process;
- :mod:`course.grading.progress`: ``course progress``, cached per notebook content;
- :mod:`course.grading.workspace`: ``course start`` / ``course update``, never overwriting an edit.

None of this is imported by the reference implementation.
"""
