"""ruff, the linter and formatter, over the package, the tests and the benchmarks.

The settings are in pyproject.toml (``[tool.ruff]``). To fix what this test reports::

    ruff format course tests benchmarks conftest.py solutions/09_memory_policies.ipynb ...
    ruff check --fix course tests benchmarks conftest.py solutions/09_memory_policies.ipynb ...

(every path of ``TARGETS``) and mend by hand what ``--fix`` leaves (it says which rule each
line breaks); after changing a lesson's notebook, ``course assign NN`` and ``course assign
--execute NN`` as after any edit of it.

pyproject.toml excludes ``*.ipynb`` from a bare ``ruff check``; the lesson notebooks named in
``LINTED_LESSONS`` are linted all the same, because ruff checks a path it is given by name.
The other lessons are not linted yet.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The lesson notebooks (their sources in solutions/) that ruff lints as it lints the package.
LINTED_LESSONS = [
    "solutions/09_memory_policies.ipynb",
    "solutions/10_compiler_memory.ipynb",
    "solutions/11_offload_pass.ipynb",
]
TARGETS = ["course", "tests", "benchmarks", "conftest.py", *LINTED_LESSONS]


def _ruff() -> list[str]:
    try:
        import ruff  # noqa: F401  (the package ships the binary)
    except ImportError:
        found = shutil.which("ruff")
        if found is None:
            pytest.fail(
                "ruff is not installed: pip install -e '.[test]' installs it (pyproject.toml, test extra)"
            )
        return [found]
    return [sys.executable, "-m", "ruff"]


def test_ruff_finds_nothing_to_lint():
    run = subprocess.run(
        [*_ruff(), "check", "--no-cache", "--output-format", "concise", *TARGETS],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, (
        "ruff check found (fix: `ruff check --fix`, then by hand):\n" + run.stdout[-6000:]
    )


def test_ruff_format_leaves_every_file_as_it_is():
    run = subprocess.run(
        [*_ruff(), "format", "--no-cache", "--check", *TARGETS], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, "files ruff would reformat (fix: `ruff format`):\n" + run.stdout[-6000:]
