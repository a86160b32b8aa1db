"""course.grading.files: the one home of the grader's fingerprint, atomic writes and the
report formats (issue 28 §3: these were spelled three, three and two ways)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import course
from course.grading import files

PACKAGE = Path(course.__file__).resolve().parent


def test_text_and_bytes_are_written_whole_and_a_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "deep" / "report.json"
    files.write_atomically(path, "é\n")
    assert path.read_bytes() == "é\n".encode()
    path.chmod(0o640)
    files.write_atomically(path, b"two")
    assert path.read_bytes() == b"two" and path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    path.write_text("old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        files.write_atomically(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["progress.json"]


def test_a_file_planted_where_a_temporary_name_could_be_is_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    for guess in (".report.json.tmp", ".report.json.0.tmp"):
        (tmp_path / guess).symlink_to(victim)
    files.write_atomically(tmp_path / "report.json", "new")
    assert victim.read_text() == "keep" and (tmp_path / "report.json").read_text() == "new"


def test_the_fingerprint_changes_with_any_file_the_checks_can_depend_on():
    digest = files.package_digest()
    assert {"checks/registry.py", "grading/files.py", "autograd/hooks.py"} <= digest.keys()
    assert not any("__pycache__" in k for k in digest)
    base = files.grader_fingerprint(digest)
    assert base == files.grader_fingerprint() == files.grader_fingerprint(dict(digest))
    assert re.fullmatch(rf"course {re.escape(course.__version__)} sha256:[0-9a-f]{{16}}", base)
    # a lesson's program (the truth of a check) or an oracle of the reference layer changes
    for path in ("content/__init__.py", "autograd/hooks.py", "checks/registry.py"):
        assert files.grader_fingerprint({**digest, path: "changed"}) != base, path


def _sources_outside_files_py():
    for p in sorted(PACKAGE.rglob("*.py")):
        if p.name != "files.py" and "__pycache__" not in p.parts:
            yield p.relative_to(PACKAGE).as_posix(), p.read_text()


def test_no_other_module_writes_atomically_by_itself_or_spells_a_report_format():
    offences = []
    for where, source in _sources_outside_files_py():
        for needle in ("os.replace(", "mkstemp(", '"course-grade/1"', '"course-gradebook/1"', "os.fsync("):
            for number, line in enumerate(source.splitlines(), 1):
                if needle in line and not line.lstrip().startswith((">>>", "...", "#")):
                    offences.append(f"course/{where}:{number}: {needle}")
    assert offences == [], (
        "one home for atomic writes and report formats (course/grading/files.py): call "
        "files.write_atomically / use files.REPORT_FORMAT instead of\n" + "\n".join(offences)
    )
