"""Scoring one notebook: ``course grade``, its reports, and the processes that run learner code.

- :mod:`course.grading.names`: which file is a lesson notebook, which an offered copy (torch-free);
- :mod:`course.grading.cells`: a notebook's cells read from its JSON, the one reader (torch-free);
- :mod:`course.grading.files`: the grader's fingerprint, atomic writes, the report formats (torch-free);
- :mod:`course.grading.grade`: ``course grade``: ties the jobs below together, writes the reports;
- :mod:`course.grading.options`: ``course grade``'s options, checked as they are read;
- :mod:`course.grading.plan`: which notebooks of a folder are graded, and why the rest are not;
- :mod:`course.grading.session`: a grading session's set-up and tear-down (passed explicitly);
- :mod:`course.grading.notebook`: grading one notebook (the kernel run, the checks, the verdicts);
- :mod:`course.grading.judging`: checking the answers and judging the outcomes against the oracle's;
- :mod:`course.grading.checker`: the client of the checking server, and the outcome files it reads;
- :mod:`course.grading.processes`: every process learner code starts, ended (psutil);
- :mod:`course.grading.isolation`: ``python -I`` children, their environment and limits;
- :mod:`course.grading.sandbox`: everything that runs learner code in a sandbox (``course grade``
  by default, the gradebook, the room, regrade), behind ``run_untrusted`` (bubblewrap's
  namespaces, an allow-list of binds, an own uid, limits);
- :mod:`course.grading.redact`: a verdict on an instructor's extra case says passed or failed only;
- :mod:`course.grading.signing`: signed, validated grade reports;
- :mod:`course.grading.untrusted`: reading learner files and neutralising learner text;
- :mod:`course.grading.report`: what a grade reports (text, ``--json``, JUnit);
- :mod:`course.grading.kernel`: run a notebook in a fresh kernel (grading and ``assign --execute``);
- :mod:`course.grading.worker`: the checking server: a fork per notebook, and of it one per
  exercise that runs the definitions and the answer; no judgement happens there;
- :mod:`course.grading.feedback`: the learner's feedback file, one section per exercise;
- :mod:`course.grading.github_classroom`: the grade as GitHub Classroom's autograder reads it;
- :mod:`course.grading.provenance`: which commit a notebook came from, and when.

The learner's folder (:mod:`course.learner`) and the instructor's class (:mod:`course.classroom`)
build on this floor; the reference implementation imports none of it.
"""
