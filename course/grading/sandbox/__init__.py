"""Everything that runs learner code goes through one face: :func:`run_untrusted`.

``course gradebook``, ``course room`` and ``course regrade`` grade each learner with
``course grade --no-run`` inside it (:func:`course.classroom.gradebook.grade_sandboxed`)::

    from course.grading.sandbox import run_untrusted
    run = run_untrusted(lambda folder: python_command("course", "grade", folder, "--json", "-"),
                        inputs=private_copy, stdin=one_time_key, timeout=600)
    run.isolation   # "bubblewrap", or NO_SANDBOX where it cannot run
    run.limits      # "cgroup v1: memory 4096 MiB, 512 processes"

- :mod:`~course.grading.sandbox.run`: bubblewrap's namespaces, the PID namespace that ends
  everything in it, the unprivileged uid, the wall-clock limit; the fallback without it;
- :mod:`~course.grading.sandbox.binds`: the allow-list of read-only binds;
- :mod:`~course.grading.sandbox.limits`: memory and process limits (cgroup, else rlimits);
- :mod:`~course.grading.sandbox.grade`: ``course grade`` in bubblewrap (its default wherever
  ``bwrap`` is installed; :func:`why_no_sandbox` is asked only when that fails), the grader
  outside and the learner's code inside;
- :mod:`~course.grading.sandbox.warm`: warm checking servers, each in a sandbox of its own,
  started before the notebook exists and used for one notebook (``course room``'s live grid).

A notebook's ``check()`` imports nothing of this package (``tests/test_grading_boundary.py``).
"""

from __future__ import annotations

from course.grading.sandbox.binds import SANDBOX_DIR, allowed_paths
from course.grading.sandbox.limits import Limits
from course.grading.sandbox.run import NO_SANDBOX, Run, run_untrusted, sandbox_available, why_no_sandbox
from course.grading.sandbox.warm import WarmPool, WarmServer, warm_available

__all__ = [
    "NO_SANDBOX",
    "SANDBOX_DIR",
    "Limits",
    "Run",
    "WarmPool",
    "WarmServer",
    "allowed_paths",
    "run_untrusted",
    "sandbox_available",
    "warm_available",
    "why_no_sandbox",
]
