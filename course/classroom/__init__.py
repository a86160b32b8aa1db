"""The instructor's class: a roster graded as one table, a live room, homework collected.

- :mod:`course.classroom.gradebook`: ``course gradebook``, a class's scores and misconceptions, from:
- :mod:`course.classroom.roster`: whose folder holds which notebooks, which signed reports count;
- :mod:`course.classroom.learner_grades`: each learner graded in a sandbox of their own, cached;
- :mod:`course.classroom.gradebook_report`: the report as text, CSV, JSON and a page;
- :mod:`course.classroom.room`: ``course room``'s grid of one lesson, regraded only where a
  notebook changed;
- :mod:`course.classroom.room_grader`: the live room's grader: warm sandboxes check, the room judges;
- :mod:`course.classroom.room_view`: the ``course room`` command: that grid as text and as a page;
- :mod:`course.classroom.collect`: ``course collect``, the signed reports of a class's CI runs;
- :mod:`course.classroom.regrade`: ``course regrade``, grading again the commit a report names;
- :mod:`course.classroom.policy`: the instructor's extensions, late penalties, point weights and
  the export an LMS gradebook imports.

Everything here grades through :mod:`course.grading`; nothing below this floor imports it.
"""

__all__: list[str] = []
