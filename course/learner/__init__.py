"""The learner's folder: their own copy of the lessons, and where each exercise stands.

- :mod:`course.learner.workspace`: ``course start`` / ``course update``, never overwriting an edit;
- :mod:`course.learner.workspace_command`: their command line: arguments in, what changed printed;
- :mod:`course.learner.manifest`: the folder's record of which version of each lesson it holds;
- :mod:`course.learner.copies`: a lesson's copies, told apart by name, hash and stamp;
- :mod:`course.learner.progress`: ``course progress``, one row per exercise, cached per notebook.

A learner's bug is looked for here first. Grading one notebook is :mod:`course.grading`'s job;
this floor calls it and keeps the results.
"""

__all__: list[str] = []
