"""Does `course doctor DIR` catch what stops a learner on the day, and name the fix for it?

The folder checks run on course folders made by `course start` itself; the kernel checks
start a real Jupyter kernel, the one the lesson notebook names, as JupyterLab would.
"""

from __future__ import annotations

import nbformat
import pytest

from course import doctor
from course.learner import workspace
from course.lessons import LESSONS


def _source(tmp_path, names=("00_first.ipynb", "01_second.ipynb")):
    src = tmp_path / "src"
    src.mkdir()
    for name in names:
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(name)]), src / name)
    return src


def _problems(found):
    return [(f.detail, f.fix) for f in found if not f.ok]


def test_a_missing_folder_fails_and_names_course_start(tmp_path):
    [finding] = doctor.check_workspace(tmp_path / "autograd-course")
    assert not finding.ok and "does not exist" in finding.detail
    assert finding.fix.startswith(f"course start {tmp_path / 'autograd-course'}")


def test_the_command_exits_1_and_prints_the_fix_for_a_missing_folder(tmp_path, capsys):
    assert doctor.main([str(tmp_path / "nowhere"), "--no-kernel"]) == 1
    out = capsys.readouterr().out
    assert f"[FIX ] workspace: {tmp_path / 'nowhere'} does not exist" in out
    assert f"-> course start {tmp_path / 'nowhere'}" in out and "all good" not in out


def test_a_folder_of_notebooks_without_a_manifest_is_told_to_adopt(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), root / "00_first.ipynb")
    [finding] = doctor.check_workspace(root)
    assert not finding.ok and finding.fix == f"course update {root} --adopt (keeps your notebooks)"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert doctor.check_workspace(empty)[0].fix == f"course start {empty}"


def test_a_deleted_lesson_names_restore(tmp_path):
    root = tmp_path / "ws"
    workspace.start(root, source=_source(tmp_path))
    (root / "01_second.ipynb").unlink()
    assert _problems(doctor.check_workspace(root)) == [
        (f"01_second.ipynb was deleted from {root}", f"course update {root} --restore 01_second.ipynb")
    ]


def test_a_stale_copy_is_found_whether_edited_or_not(tmp_path):
    src, root = _source(tmp_path), tmp_path / "ws"
    workspace.start(root, source=src)
    assert [f.ok for f in doctor.check_workspace(root)] == [True]
    for name in ("00_first.ipynb", "01_second.ipynb"):  # the course ships a new version of both
        nb = nbformat.read(src / name, as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell("new in this version"))
        nbformat.write(nb, src / name)
    mine = nbformat.read(root / "01_second.ipynb", as_version=4)  # and the learner edited one
    mine.cells.append(nbformat.v4.new_code_cell("my_answer = 1"))
    nbformat.write(mine, root / "01_second.ipynb")
    assert _problems(doctor.check_workspace(root)) == [
        (
            "00_first.ipynb is an older version of the lesson (you have not edited it)",
            f"course update {root} replaces it",
        ),
        (
            "01_second.ipynb is an older version, edited by you",
            f"course update {root} keeps yours and saves the new one beside it",
        ),
    ]
    workspace.update(root)  # what the fixes say to do
    assert [f.ok for f in doctor.check_workspace(root)] == [True]


def test_a_lesson_the_install_has_and_the_folder_lacks_is_missing(tmp_path):
    root = tmp_path / "ws"
    workspace.start(root)  # the installed course's lessons
    manifest = root / workspace.MANIFEST
    text = manifest.read_text()
    import json

    data = json.loads(text)
    last = LESSONS[-1].notebook
    del data["lessons"][last]  # as if the folder was made by an older release without it
    (root / last).unlink()
    manifest.write_text(json.dumps(data))
    assert _problems(doctor.check_workspace(root)) == [
        (f"1 lesson(s) not in {root}: {last}", f"course update {root}")
    ]


def test_a_kernel_that_does_not_exist_names_the_command_that_registers_one(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "no-such-kernel", "display_name": "x", "language": "python"}
    nbformat.write(nb, tmp_path / "00_first.ipynb")
    finding = doctor.check_kernel(tmp_path / "00_first.ipynb")
    assert not finding.ok and "no kernel named 'no-such-kernel'" in finding.detail
    assert "-m ipykernel install --user --name no-such-kernel" in finding.fix


@pytest.mark.slow
def test_a_kernel_without_the_course_is_told_to_register_this_python(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import course_not_installed_here")])
    nbformat.write(nb, tmp_path / "00_first.ipynb")
    finding = doctor.check_kernel(tmp_path / "00_first.ipynb")
    assert not finding.ok and "No module named 'course_not_installed_here'" in finding.detail
    assert "-m ipykernel install --user --name python3" in finding.fix


@pytest.mark.slow
def test_a_healthy_folder_passes_with_the_first_lesson_run_in_a_real_kernel(tmp_path, capsys):
    root = tmp_path / "autograd-course"
    workspace.start(root)
    assert doctor.first_lesson(root) == root / LESSONS[0].notebook  # the learner's own copy runs
    rc = doctor.main([str(root)])
    out = capsys.readouterr().out
    assert f"[ok  ] workspace: {root}: {len(LESSONS)} lessons, none missing or stale" in out
    assert f"ran the first code cell of {LESSONS[0].notebook} and built a widget in " in out
    problems = [line for line in out.splitlines() if line.startswith("[FIX")]  # the install's own, if any
    assert all("workspace" not in line and "kernel" not in line for line in problems)
    assert rc == (1 if problems else 0) and out.rstrip().endswith("all good") == (not problems)
