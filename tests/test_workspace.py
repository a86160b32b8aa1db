"""Do `course start` and `course update` copy lessons in without ever losing the learner's work?"""

from __future__ import annotations

import errno
import json
import os
import shlex
import tempfile
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course import cli
from course import lessons as course_lessons
from course.learner import workspace, workspace_command
from course.learner.workspace import Change, WorkspaceError, cells_hash


def write_lesson(folder: Path, name: str, *sources: str) -> Path:
    """A lesson notebook: a markdown title, then one code cell per source."""
    folder.mkdir(parents=True, exist_ok=True)
    cells = [nbformat.v4.new_markdown_cell(f"# {name}")]
    cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / name)
    return folder / name


def edit(path: Path, source: str = "my_answer = 42") -> None:
    """What a learner does in JupyterLab: type into a cell and save."""
    nb = nbformat.read(path, as_version=4)
    nb.cells[-1].source += "\n" + source
    nbformat.write(nb, path)


def run_cells(path: Path) -> None:
    """What Run All does: outputs and execution counts change, sources do not."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", text=f"ran {i}\n")]
    nbformat.write(nb, path)


def sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells]


def kinds(changes: list[Change]) -> dict[str, str]:
    return {c.lesson: c.kind for c in changes}


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "notebooks"
    write_lesson(folder, "00_warmup.ipynb", "x = 1")
    write_lesson(folder, "01_graph.ipynb", "raise NotImplementedError('exercise 1.1')")
    write_lesson(folder, "02_hooks.ipynb", "raise NotImplementedError('exercise 2.1')")
    return folder


@pytest.fixture
def root(tmp_path: Path, src: Path) -> Path:
    workspace.start(tmp_path / "mine", source=src)
    return tmp_path / "mine"


def manifest(root: Path) -> dict:
    return json.loads((root / ".course" / "manifest.json").read_text())


# --- start -------------------------------------------------------------------------------


def test_start_copies_every_lesson_and_records_its_hash(tmp_path, src, capsys):
    dest = tmp_path / "course dir"
    assert cli.main(["start", str(dest), "--source", str(src)]) == 0
    out = capsys.readouterr().out
    assert "copied 3 lessons" in out and f" lab {shlex.quote(str(dest))}" in out
    lessons = manifest(dest)["lessons"]
    assert sorted(lessons) == ["00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"]
    for name, entry in lessons.items():
        assert entry == {"file": name, "shipped": cells_hash(src / name)}
        assert sources(dest / name) == sources(src / name)
        assert nbformat.read(dest / name, as_version=4).metadata.course.lesson == name


def test_start_refuses_a_folder_with_notebooks_and_points_at_update(root, src, capsys):
    edit(root / "01_graph.ipynb")
    before = snapshot(root)
    assert workspace_command.main(["start", str(root), "--source", str(src)]) == 1
    err = capsys.readouterr().err
    assert "already has notebooks" in err and f"course update {root}" in err
    assert snapshot(root) == before


def test_start_into_a_file_is_a_clear_error(tmp_path, src):
    (tmp_path / "f").write_text("x")
    with pytest.raises(WorkspaceError, match="is a file, not a folder"):
        workspace.start(tmp_path / "f", source=src)


def test_copies_get_ordinary_file_permissions_not_mkstemps(root):
    (root / "probe").write_text("")  # what open() gives a new file under this umask
    assert (root / "00_warmup.ipynb").stat().st_mode & 0o777 == (root / "probe").stat().st_mode & 0o777
    (root / "01_graph.ipynb").chmod(0o640)  # a replaced file keeps the learner's permissions
    workspace.write_atomically(root / "01_graph.ipynb", (root / "01_graph.ipynb").read_bytes())
    assert (root / "01_graph.ipynb").stat().st_mode & 0o777 == 0o640


def test_start_fills_an_existing_empty_folder(tmp_path, src):
    (tmp_path / "empty").mkdir()
    assert kinds(workspace.start(tmp_path / "empty", source=src)) == dict.fromkeys(
        ["00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"], "new"
    )


def test_the_course_command_dispatches_start_and_update(tmp_path, src, capsys):
    assert cli.main(["start", str(tmp_path / "w"), "--source", str(src)]) == 0
    assert cli.main(["update", str(tmp_path / "w"), "--source", str(src)]) == 0
    assert "everything is up to date" in capsys.readouterr().out


# --- finding the notebooks -----------------------------------------------------------------


def installed_at(monkeypatch, folder: Path) -> None:
    """Pretend the course's own notebooks are in ``folder`` (a checkout's, or a wheel's)."""
    monkeypatch.setattr(course_lessons, "notebook_folders", lambda: [folder])


def test_a_checkout_reads_its_own_notebooks_folder():
    from course import lessons

    checkout = Path(__file__).resolve().parents[1]
    assert lessons.notebook_folders()[-1] == checkout / "notebooks"
    assert workspace.find_source() == checkout / "notebooks"  # this checkout: no wheel data here


def test_notebooks_are_found_where_the_install_keeps_them(tmp_path, src, monkeypatch):
    installed_at(monkeypatch, src)
    assert workspace.find_source() == src.resolve()


def test_an_installed_package_without_notebooks_names_the_fix(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    installed_at(monkeypatch, site / "course" / "lessons_data")
    with pytest.raises(WorkspaceError) as info:
        workspace.start(tmp_path / "w")
    message = str(info.value)
    assert str(site / "course" / "lessons_data") in message and "--source DIR" in message
    assert "reinstall" in message
    assert not (tmp_path / "w").exists()


def test_the_start_message_names_a_command_that_works_without_an_activated_venv(
    tmp_path, src, monkeypatch, capsys
):
    bin_dir = Path(os.sys.executable).parent
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert workspace_command.main(["start", str(tmp_path / "w"), "--source", str(src)]) == 0
    out = capsys.readouterr().out
    assert f"{shlex.quote(str(bin_dir / 'course'))} lab {tmp_path / 'w'}" in out
    assert str(bin_dir) in out and "not on your PATH" in out
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin")
    assert workspace_command.main(["start", str(tmp_path / "v"), "--source", str(src)]) == 0
    out = capsys.readouterr().out
    assert f"\n  course lab {tmp_path / 'v'}\n" in out and "PATH" not in out


def test_update_uses_the_source_recorded_at_start(root, src, tmp_path, monkeypatch):
    write_lesson(tmp_path / "checkout" / "notebooks", "09_other.ipynb", "w = 4")
    installed_at(monkeypatch, tmp_path / "checkout" / "notebooks")
    write_lesson(src, "03_saved_tensors.ipynb", "y = 2")
    assert kinds(workspace.update(root)) == {"03_saved_tensors.ipynb": "new"}


def test_update_falls_back_to_the_package_notebooks_when_the_recorded_folder_is_gone(
    root, src, tmp_path, monkeypatch
):
    write_lesson(tmp_path / "checkout" / "notebooks", "09_other.ipynb", "w = 4")
    installed_at(monkeypatch, tmp_path / "checkout" / "notebooks")
    for notebook in src.iterdir():
        notebook.unlink()
    assert kinds(workspace.update(root))["09_other.ipynb"] == "new"
    assert manifest(root)["source"] == str(tmp_path / "checkout" / "notebooks")


def test_update_outside_a_course_folder_says_to_start_one(tmp_path, src):
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkspaceError, match="course start"):
        workspace.update(tmp_path / "empty", source=src)


# --- update --------------------------------------------------------------------------------


def test_a_new_lesson_is_copied_in(root, src, capsys):
    write_lesson(src, "03_saved_tensors.ipynb", "y = 2")
    assert workspace_command.main(["update", str(root), "--source", str(src)]) == 0
    assert "new       03_saved_tensors.ipynb" in capsys.readouterr().out
    assert sources(root / "03_saved_tensors.ipynb") == sources(src / "03_saved_tensors.ipynb")


def test_the_offered_copy_differs_from_the_lesson_at_the_front_of_its_name(root, src):
    """Issue 35, item 6: JupyterLab's file browser cuts long names at the end, so the two
    names must differ in their first characters; and a copy an older version offered under
    the old name (``01_graph.updated.ipynb``) is still one, for every command."""
    from course.grading.names import is_offered_copy, lesson_number
    from course.grading.plan import plan_folder

    edit(root / "01_graph.ipynb")
    write_lesson(src, "01_graph.ipynb", "raise NotImplementedError('exercise 1.1')", "z = 3")
    workspace.update(root, source=src)
    offered = [p.name for p in root.glob("*.ipynb") if is_offered_copy(p.name)]
    assert offered == ["updated-01_graph.ipynb"] and offered[0][:8] != "01_graph.ipynb"[:8]
    old = "01_graph.updated.ipynb"
    assert is_offered_copy(old) and lesson_number(old) is None
    (root / old).write_bytes((root / "updated-01_graph.ipynb").read_bytes())
    ignored = {Path(i["path"]).name: i["reason"] for i in plan_folder(root, None)[2]}
    assert set(ignored) >= {old, "updated-01_graph.ipynb"} and "offered" in ignored[old]


def test_an_unedited_notebook_is_replaced_when_the_lesson_changes(root, src):
    run_cells(root / "01_graph.ipynb")  # ran the cells: outputs only, not an edit
    write_lesson(src, "01_graph.ipynb", "raise NotImplementedError('exercise 1.1')", "z = 3")
    assert kinds(workspace.update(root, source=src)) == {"01_graph.ipynb": "updated"}
    assert sources(root / "01_graph.ipynb") == sources(src / "01_graph.ipynb")
    assert manifest(root)["lessons"]["01_graph.ipynb"]["shipped"] == cells_hash(src / "01_graph.ipynb")


def test_an_edited_notebook_is_kept_and_the_new_version_saved_beside_it(root, src, capsys):
    edit(root / "01_graph.ipynb")
    mine = (root / "01_graph.ipynb").read_bytes()
    write_lesson(src, "01_graph.ipynb", "raise NotImplementedError('exercise 1.1')", "z = 3")
    assert workspace_command.main(["update", str(root), "--source", str(src)]) == 0
    assert "updated-01_graph.ipynb" in capsys.readouterr().out
    assert (root / "01_graph.ipynb").read_bytes() == mine
    assert sources(root / "updated-01_graph.ipynb") == sources(src / "01_graph.ipynb")
    # Asked again: nothing new is written, and the learner is reminded where it is.
    again = workspace.update(root, source=src)
    assert [(c.kind, c.detail) for c in again] == [
        ("kept", "yours is edited; the new version is still at updated-01_graph.ipynb")
    ]
    assert sorted(p.name for p in root.glob("*01_graph*")) == ["01_graph.ipynb", "updated-01_graph.ipynb"]


def test_the_saved_beside_copy_never_clobbers_a_file(root, src):
    edit(root / "01_graph.ipynb")
    (root / "updated-01_graph.ipynb").write_text("the learner's own notes")
    write_lesson(src, "01_graph.ipynb", "z = 3")
    assert "updated-2-01_graph.ipynb" in workspace.update(root, source=src)[0].detail
    assert (root / "updated-01_graph.ipynb").read_text() == "the learner's own notes"


def test_an_edited_notebook_of_an_unchanged_lesson_is_left_alone(root, src):
    edit(root / "01_graph.ipynb")
    before = snapshot(root)
    assert workspace.update(root, source=src) == []
    assert {k: v for k, v in snapshot(root).items() if not k.startswith(".course")} == {
        k: v for k, v in before.items() if not k.startswith(".course")
    }


def test_adopting_the_offered_version_counts_as_up_to_date(root, src):
    edit(root / "01_graph.ipynb")
    write_lesson(src, "01_graph.ipynb", "z = 3")
    workspace.update(root, source=src)
    os.replace(root / "updated-01_graph.ipynb", root / "01_graph.ipynb")
    assert workspace.update(root, source=src) == []
    assert "offered" not in manifest(root)["lessons"]["01_graph.ipynb"]


def test_a_deleted_notebook_is_not_brought_back_until_asked(root, src, capsys):
    (root / "02_hooks.ipynb").unlink()
    write_lesson(src, "02_hooks.ipynb", "changed = True")
    assert workspace_command.main(["update", str(root), "--source", str(src)]) == 0
    out = capsys.readouterr().out
    assert "deleted" in out and f"course update {root} --restore 02_hooks.ipynb" in out
    assert not (root / "02_hooks.ipynb").exists()
    assert workspace_command.main(["update", str(root), "--source", str(src), "--restore", "02_hooks"]) == 0
    assert "restored  02_hooks.ipynb" in capsys.readouterr().out
    assert sources(root / "02_hooks.ipynb") == sources(src / "02_hooks.ipynb")


def test_other_notebooks_of_the_learner_are_not_mistaken_for_a_deleted_lesson(root, src):
    nbformat.write(nbformat.v4.new_notebook(), root / "scratch.ipynb")  # no course stamp
    (root / ".ipynb_checkpoints").mkdir()
    (root / "02_hooks.ipynb").rename(root / ".ipynb_checkpoints" / "02_hooks-checkpoint.ipynb")
    assert kinds(workspace.update(root, source=src)) == {"02_hooks.ipynb": "deleted"}


def test_a_damaged_manifest_is_a_clear_error(root, src):
    (root / ".course" / "manifest.json").write_text('{"format": 1}')
    with pytest.raises(WorkspaceError, match="manifest.json is damaged"):
        workspace.update(root, source=src)


def test_restoring_a_lesson_that_is_still_there_changes_nothing(root, src):
    os.replace(root / "02_hooks.ipynb", root / "mine.ipynb")
    edit(root / "mine.ipynb")
    before = snapshot(root)
    changes = workspace.update(root, source=src, restore=["02_hooks.ipynb"])
    assert [(c.kind, c.detail) for c in changes] == [
        ("renamed", "found as mine.ipynb; tracking it there"),
        ("present", "not restored: your copy is at mine.ipynb"),
    ]
    assert {k for k in snapshot(root) if not k.startswith(".course")} == {
        k for k in before if not k.startswith(".course")
    }


def test_restoring_an_unknown_lesson_lists_the_lessons(root, src):
    with pytest.raises(WorkspaceError, match="00_warmup.ipynb, 01_graph.ipynb, 02_hooks.ipynb"):
        workspace.update(root, source=src, restore=["99_nope"])


def test_a_renamed_notebook_is_tracked_not_duplicated(root, src):
    os.replace(root / "01_graph.ipynb", root / "mine.ipynb")
    run_cells(root / "mine.ipynb")
    assert [(c.kind, c.detail) for c in workspace.update(root, source=src)] == [
        ("renamed", "found as mine.ipynb; tracking it there")
    ]
    assert not (root / "01_graph.ipynb").exists()
    # The lesson changes; the renamed copy was not edited, so it is the one updated.
    write_lesson(src, "01_graph.ipynb", "z = 3")
    assert kinds(workspace.update(root, source=src)) == {"01_graph.ipynb": "updated"}
    assert sources(root / "mine.ipynb") == sources(src / "01_graph.ipynb")
    assert not (root / "01_graph.ipynb").exists()


def test_an_edited_renamed_notebook_is_found_by_its_lesson_stamp(root, src):
    edit(root / "01_graph.ipynb")
    (root / "sub").mkdir()
    os.replace(root / "01_graph.ipynb", root / "sub" / "mine.ipynb")
    assert kinds(workspace.update(root, source=src)) == {"01_graph.ipynb": "renamed"}
    assert manifest(root)["lessons"]["01_graph.ipynb"]["file"] == "sub/mine.ipynb"
    assert [lesson for lesson, path in workspace.locate(root) if path is None] == []
    write_lesson(src, "01_graph.ipynb", "z = 3")  # the new version goes beside the learner's copy
    assert workspace.update(root, source=src)[0].detail.endswith("beside it: sub/updated-01_graph.ipynb")
    assert sources(root / "sub" / "updated-01_graph.ipynb") == sources(src / "01_graph.ipynb")


def test_a_file_of_the_learner_with_a_new_lessons_name_is_kept(root, src):
    (root / "03_saved_tensors.ipynb").write_text("not a notebook, but the learner's")
    write_lesson(src, "03_saved_tensors.ipynb", "y = 2")
    [change] = workspace.update(root, source=src)
    assert change.detail.startswith("saved as updated-03_saved_tensors.ipynb")
    assert (root / "03_saved_tensors.ipynb").read_text() == "not a notebook, but the learner's"


def test_a_lesson_dropped_from_the_course_stays_in_the_folder(root, src):
    (src / "02_hooks.ipynb").unlink()
    assert kinds(workspace.update(root, source=src)) == {"02_hooks.ipynb": "retired"}
    assert (root / "02_hooks.ipynb").exists()


# --- failures: read-only disks, crashes ------------------------------------------------------


def _read_only(*args, **kwargs):
    raise OSError(errno.EROFS, "Read-only file system")


def test_a_read_only_workspace_loses_nothing_and_says_what_to_do(root, src, monkeypatch, capsys):
    edit(root / "01_graph.ipynb")
    write_lesson(src, "00_warmup.ipynb", "x = 2")
    write_lesson(src, "01_graph.ipynb", "z = 3")
    write_lesson(src, "03_saved_tensors.ipynb", "y = 2")
    before = snapshot(root)
    monkeypatch.setattr(workspace, "write_atomically", _read_only)
    assert workspace_command.main(["update", str(root), "--source", str(src)]) == 1
    err = capsys.readouterr().err
    assert f"cannot write to {root}: the disk is read-only" in err
    assert "nothing was changed" in err and "make" in err and "writable" in err
    assert snapshot(root) == before


def test_an_update_with_nothing_to_do_writes_nothing(root, src, monkeypatch):
    monkeypatch.setattr(workspace, "write_atomically", _read_only)  # so it works on a read-only disk
    assert workspace.update(root, source=src) == []


def test_a_crash_between_writes_leaves_whole_files_and_update_finishes_later(root, src, monkeypatch):
    write_lesson(src, "00_warmup.ipynb", "x = 2")
    write_lesson(src, "01_graph.ipynb", "z = 3")
    real, calls = workspace.write_atomically, []

    def fail_second(path, data):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(workspace, "write_atomically", fail_second)
    with pytest.raises(WorkspaceError, match="disk is full.*\n.*1 change"):
        workspace.update(root, source=src)
    assert sources(root / "00_warmup.ipynb") == sources(src / "00_warmup.ipynb")  # done
    assert sources(root / "01_graph.ipynb") == [
        "# 01_graph.ipynb",
        "raise NotImplementedError('exercise 1.1')",
    ]
    monkeypatch.setattr(workspace, "write_atomically", real)
    assert kinds(workspace.update(root, source=src)) == {"01_graph.ipynb": "updated"}
    assert not list(root.rglob("*.tmp"))


def test_a_failed_replace_keeps_the_old_file_and_no_temporary(root, src, monkeypatch):
    before = (root / "00_warmup.ipynb").read_bytes()
    write_lesson(src, "00_warmup.ipynb", "x = 2")
    monkeypatch.setattr(os, "replace", _read_only)
    with pytest.raises(WorkspaceError, match="read-only"):
        workspace.update(root, source=src)
    assert (root / "00_warmup.ipynb").read_bytes() == before
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores file permissions; the EROFS test above simulates this case",
)
def test_a_folder_without_write_permission_is_a_clear_error(root, src):
    write_lesson(src, "03_saved_tensors.ipynb", "y = 2")
    before = snapshot(root)
    root.chmod(0o555)
    try:
        with pytest.raises(WorkspaceError, match="permission denied"):
            workspace.update(root, source=src)
    finally:
        root.chmod(0o755)
    assert snapshot(root) == before


def test_a_notebook_the_learner_broke_counts_as_edited(root, src):
    (root / "00_warmup.ipynb").write_text("{ not json")
    assert cells_hash(root / "00_warmup.ipynb").startswith("raw:")
    write_lesson(src, "00_warmup.ipynb", "x = 2")
    assert kinds(workspace.update(root, source=src)) == {"00_warmup.ipynb": "offered"}
    assert (root / "00_warmup.ipynb").read_text() == "{ not json"


# --- any sequence of learner actions and course changes -----------------------------------------

ACTIONS = st.lists(
    st.tuples(st.sampled_from(["edit", "run", "rename", "delete", "upstream", "update"]), st.integers(0, 2)),
    max_size=14,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ACTIONS)
def test_no_sequence_of_actions_loses_an_edit_or_duplicates_a_lesson(steps):
    """Whatever the learner does (edit, run, rename, delete) and however the course changes:
    every update keeps each edited file as the learner left it, brings each unedited lesson
    up to date where it now lives, offers each new version exactly once, never brings back
    a deleted lesson, and a second update straight after changes nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        src, root = Path(tmp) / "notebooks", Path(tmp) / "mine"
        lessons = [f"0{i}_lesson.ipynb" for i in range(3)]
        for name in lessons:
            write_lesson(src, name, f"# {name}")
        workspace.start(root, source=src)
        where = {name: name for name in lessons}  # where the learner's copy of each lesson is
        mine: dict[str, str] = {}  # files the learner edited -> their hash
        deleted: set[str] = set()
        base = {name: cells_hash(src / name) for name in lessons}  # version each copy came from
        for k, (action, i) in enumerate(steps + [("update", 0)]):
            lesson = lessons[i]
            path = root / where[lesson] if lesson in where else None
            if action == "upstream":
                write_lesson(src, lesson, *sources(src / lesson)[1:], f"upstream_{k} = {k}")
            elif action == "update":
                check_update(root, src, lessons, where, mine, deleted, base)
            elif path is None:
                continue
            elif action == "edit":
                edit(path, f"edit_{k} = {k}")
                mine[where[lesson]] = cells_hash(path)
            elif action == "run":
                run_cells(path)
            elif action == "rename":
                new = f"renamed_{k}.ipynb"
                os.replace(path, root / new)
                if where[lesson] in mine:
                    mine[new] = mine.pop(where[lesson])
                where[lesson] = new
            elif action == "delete":
                path.unlink()
                mine.pop(where.pop(lesson), None)
                deleted.add(lesson)


def check_update(root, src, lessons, where, mine, deleted, base):
    before = set(snapshot(root))
    workspace.update(root, source=src)
    notebooks = {p.relative_to(root).as_posix(): cells_hash(p) for p in root.rglob("*.ipynb")}
    for rel, digest in mine.items():  # no edit lost
        assert notebooks[rel] == digest
    for lesson in lessons:
        upstream = cells_hash(src / lesson)
        if lesson in deleted:
            continue
        if where[lesson] not in mine:  # unedited: up to date, where the learner keeps it
            assert notebooks[where[lesson]] == upstream
            base[lesson] = upstream
        offered = base[lesson] != upstream  # edited, and the course changed since
        assert list(notebooks.values()).count(upstream) == (1 if offered or where[lesson] not in mine else 0)
    tracked = {lesson: entry["file"] for lesson, entry in manifest(root)["lessons"].items()}
    assert {lesson: tracked[lesson] for lesson in where} == where  # renames followed
    for rel in set(notebooks) - before:  # nothing deleted comes back
        assert workspace.course_stamp(root / rel).get("lesson") not in deleted
    again = workspace.update(root, source=src)
    assert not [c for c in again if c.kind in {"new", "updated", "offered", "restored", "renamed"}]


def test_course_lab_starts_then_updates_then_execs_jupyter_on_the_folder(tmp_path, monkeypatch):
    """`course lab` (the README's open command): start the first time, update after, then JupyterLab."""
    from course import lab

    source = tmp_path / "src"
    source.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, source / "01_first.ipynb")
    execs = []
    monkeypatch.setattr(lab.os, "execv", lambda path, cmd: execs.append(cmd))
    ws = tmp_path / "ws"
    assert lab.main([str(ws), "--source", str(source), "--", "--no-browser"]) == 0
    assert (ws / "01_first.ipynb").exists() and (ws / lab.workspace.MANIFEST).exists()
    (ws / "01_first.ipynb").write_text((ws / "01_first.ipynb").read_text().replace("x = 1", "x = 2"))
    assert lab.main([str(ws), "--source", str(source)]) == 0  # an update: the edit stays
    assert "x = 2" in (ws / "01_first.ipynb").read_text()
    assert [c[1:5] for c in execs] == [["-m", "jupyter", "lab", str(ws)]] * 2
    assert "--no-browser" in execs[0]
    assert ("--allow-root" in execs[0]) == (os.geteuid() == 0)


# --- a kill in the middle of an update (issue 18) -----------------------------------------------

KILLER = """
import os, signal, sys
from course.learner import workspace, workspace_command

stop_at, written, real = int(sys.argv[1]), [], workspace.write_atomically

def write_then_maybe_die(path, data):
    real(path, data)
    if path.suffix == ".ipynb":  # a notebook is written; its manifest entry is not yet
        written.append(path)
        if len(written) == stop_at:
            os.kill(os.getpid(), signal.SIGKILL)

workspace.write_atomically = write_then_maybe_die
sys.exit(workspace_command.main(["update", sys.argv[2], "--source", sys.argv[3]]))
"""


def killed_update(root: Path, src: Path, stop_at: int) -> int:
    """The real `course update`, in a process killed right after its ``stop_at``-th notebook write."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", KILLER, str(stop_at), str(root), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    ).returncode


def course_changes(src: Path) -> None:
    write_lesson(src, "00_warmup.ipynb", "x = 2")  # unedited: replaced
    write_lesson(
        src, "01_graph.ipynb", "raise NotImplementedError('exercise 1.1')", "z = 3"
    )  # edited: offered
    write_lesson(src, "03_saved_tensors.ipynb", "y = 2")  # new


@pytest.mark.parametrize("stop_at", [1, 2, 3])
def test_a_kill_after_any_notebook_write_leaves_bookkeeping_that_the_next_update_completes(
    root, src, stop_at
):
    edit(root / "01_graph.ipynb")
    mine = (root / "01_graph.ipynb").read_bytes()
    course_changes(src)
    assert killed_update(root, src, stop_at) == -9  # really killed, before its manifest was saved
    for _ in range(2):  # the kill, then the update that completes it, then one more
        workspace.update(root, source=src)
    assert (root / "01_graph.ipynb").read_bytes() == mine  # the edit survives
    assert sources(root / "00_warmup.ipynb") == sources(src / "00_warmup.ipynb")  # not "edited"
    entries = manifest(root)["lessons"]
    assert entries["00_warmup.ipynb"]["shipped"] == cells_hash(src / "00_warmup.ipynb")
    assert sorted(p.name for p in root.glob("*01_graph*")) == ["01_graph.ipynb", "updated-01_graph.ipynb"]
    assert entries["01_graph.ipynb"]["offered"] == {
        "file": "updated-01_graph.ipynb",
        "hash": cells_hash(src / "01_graph.ipynb"),
    }
    assert sorted(p.name for p in root.glob("03_*")) == ["03_saved_tensors.ipynb"]
    assert kinds(workspace.update(root, source=src)) == {"01_graph.ipynb": "kept"}  # nothing written
    assert not list(root.rglob("*.tmp"))


def test_thirty_killed_updates_add_no_files(root, src):
    edit(root / "01_graph.ipynb")
    course_changes(src)
    for _ in range(30):
        killed_update(root, src, 2)  # always killed right after writing the offered copy
    workspace.update(root, source=src)
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.ipynb"))
    assert names == [
        "00_warmup.ipynb",
        "01_graph.ipynb",
        "02_hooks.ipynb",
        "03_saved_tensors.ipynb",
        "updated-01_graph.ipynb",
    ]


def test_each_lessons_manifest_entry_is_saved_with_its_notebook(root, src, monkeypatch):
    course_changes(src)
    order = []
    real_write = workspace.write_atomically
    monkeypatch.setattr(
        workspace, "write_atomically", lambda path, data: (order.append(path.name), real_write(path, data))
    )
    workspace.update(root, source=src)
    assert order == [
        "00_warmup.ipynb",
        "manifest.json",
        "01_graph.ipynb",
        "manifest.json",
        "03_saved_tensors.ipynb",
        "manifest.json",
    ]


def test_a_lesson_has_one_offered_copy_however_often_the_course_changes(root, src):
    edit(root / "01_graph.ipynb")
    for k in range(4):
        write_lesson(src, "01_graph.ipynb", f"version = {k}")
        workspace.update(root, source=src)
    assert sorted(p.name for p in root.glob("*01_graph*")) == ["01_graph.ipynb", "updated-01_graph.ipynb"]
    assert sources(root / "updated-01_graph.ipynb") == sources(src / "01_graph.ipynb")


def test_an_offered_copy_the_learner_edited_is_theirs_and_kept(root, src):
    edit(root / "01_graph.ipynb")
    write_lesson(src, "01_graph.ipynb", "version = 1")
    workspace.update(root, source=src)
    edit(root / "updated-01_graph.ipynb", "merged = True")
    merged = (root / "updated-01_graph.ipynb").read_bytes()
    write_lesson(src, "01_graph.ipynb", "version = 2")
    assert workspace.update(root, source=src)[0].detail.endswith("beside it: updated-2-01_graph.ipynb")
    assert (root / "updated-01_graph.ipynb").read_bytes() == merged


# --- a lost manifest is not a dead end ----------------------------------------------------------


def lose_the_manifest(root: Path) -> None:
    (root / ".course" / "manifest.json").unlink()


def test_update_without_a_manifest_names_adopt(root, src, capsys):
    lose_the_manifest(root)
    assert workspace_command.main(["update", str(root), "--source", str(src)]) == 1
    assert f"course update {root} --adopt" in capsys.readouterr().err


def test_adopt_rebuilds_the_manifest_and_keeps_every_edit(root, src, capsys):
    edit(root / "01_graph.ipynb")
    mine = (root / "01_graph.ipynb").read_bytes()
    os.replace(root / "02_hooks.ipynb", root / "my hooks.ipynb")  # renamed, unedited
    before = manifest(root)
    lose_the_manifest(root)
    assert workspace_command.main(["update", str(root), "--source", str(src), "--adopt"]) == 0
    out = capsys.readouterr().out
    assert "adopted   01_graph.ipynb: 01_graph.ipynb (edited: kept as it is)" in out
    assert "adopted   02_hooks.ipynb: my hooks.ipynb" in out
    assert manifest(root)["lessons"] == {
        **before["lessons"],
        "02_hooks.ipynb": {**before["lessons"]["02_hooks.ipynb"], "file": "my hooks.ipynb"},
    }
    assert (root / "01_graph.ipynb").read_bytes() == mine
    course_changes(src)  # and it goes on as if the manifest had never gone
    assert kinds(workspace.update(root, source=src)) == {
        "00_warmup.ipynb": "updated",
        "01_graph.ipynb": "offered",
        "03_saved_tensors.ipynb": "new",
    }
    assert (root / "01_graph.ipynb").read_bytes() == mine


def test_adopt_recognises_an_old_unedited_copy_and_the_offered_one(root, src):
    edit(root / "01_graph.ipynb")
    course_changes(src)
    workspace.update(root, source=src)  # updated-01_graph.ipynb offered
    write_lesson(src, "00_warmup.ipynb", "x = 3")  # 00 is now behind, unedited
    lose_the_manifest(root)
    changes = workspace.adopt(root, source=src)
    assert kinds(changes)["00_warmup.ipynb"] == "updated"  # known unedited by its stamp
    assert manifest(root)["lessons"]["01_graph.ipynb"]["offered"]["file"] == "updated-01_graph.ipynb"
    assert len(list(root.glob("*01_graph*"))) == 2
    assert kinds(workspace.update(root, source=src)) == {"01_graph.ipynb": "kept"}


def test_start_on_notebooks_without_a_manifest_adopts_them(root, src, capsys):
    edit(root / "01_graph.ipynb")
    mine = (root / "01_graph.ipynb").read_bytes()
    (root / "00_warmup.ipynb").unlink()
    lose_the_manifest(root)
    assert workspace_command.main(["start", str(root), "--source", str(src)]) == 0
    out = capsys.readouterr().out
    assert "adopted 2 lesson(s), every edit kept" in out and "new       00_warmup.ipynb" in out
    assert (root / "01_graph.ipynb").read_bytes() == mine
    assert sorted(manifest(root)["lessons"]) == ["00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"]


# --- a manifest we did not write is refused ---------------------------------------------------------


@pytest.mark.parametrize(
    "entry, says",
    [
        ({}, "the entry of 01_graph.ipynb is {}"),
        ("01_graph.ipynb", 'the entry of 01_graph.ipynb is "01_graph.ipynb"'),
        ({"file": 3, "shipped": "x"}, "the entry of 01_graph.ipynb"),
        ({"file": "OUTSIDE/evil.ipynb", "shipped": "x"}, "which is not a notebook inside"),
        ({"file": "../evil.ipynb", "shipped": "x"}, "'../evil.ipynb', which is not a notebook inside"),
        (
            {"file": "01_graph.ipynb", "shipped": "x", "offered": {"file": "../evil.ipynb", "hash": "x"}},
            "which is not a notebook inside",
        ),
        ({"file": "01_graph.ipynb", "shipped": "x", "offered": "updated-01_graph.ipynb"}, "the offered copy"),
        ({"file": "01_graph.txt", "shipped": "x"}, "which is not a notebook inside"),
    ],
)
def test_a_manifest_entry_we_did_not_write_is_refused_and_nothing_is_written(
    root, src, tmp_path, entry, says, capsys
):
    outside = tmp_path / "outside"
    outside.mkdir()
    if isinstance(entry, dict) and entry.get("file") == "OUTSIDE/evil.ipynb":
        entry = {**entry, "file": str(outside / "evil.ipynb")}  # an absolute path
    data = manifest(root)
    data["lessons"]["01_graph.ipynb"] = entry
    (root / ".course" / "manifest.json").write_text(json.dumps(data))
    course_changes(src)
    before = snapshot(tmp_path)
    assert cli.main(["update", str(root), "--source", str(src)]) == 1
    err = capsys.readouterr().err
    assert "manifest.json is damaged" in err and says in err and "--adopt" in err
    assert "Traceback" not in err
    assert snapshot(tmp_path) == before


def test_a_tracked_folder_that_links_outside_is_refused(root, src, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sub").symlink_to(outside)
    data = manifest(root)
    data["lessons"]["01_graph.ipynb"]["file"] = "sub/01_graph.ipynb"
    (root / ".course" / "manifest.json").write_text(json.dumps(data))
    course_changes(src)
    assert cli.main(["update", str(root), "--source", str(src)]) == 1
    assert "not a notebook inside" in capsys.readouterr().err
    assert list(outside.iterdir()) == []


def test_adopt_mends_a_damaged_manifest(root, src):
    edit(root / "01_graph.ipynb")
    (root / ".course" / "manifest.json").write_text('{"format": 1, "lessons": {"01_graph.ipynb": {}}}')
    workspace.adopt(root, source=src)
    assert sorted(manifest(root)["lessons"]) == ["00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"]


# --- a newer course version (issue 21) ----------------------------------------------------------------


def test_a_folder_made_by_an_older_version_gets_the_new_versions_lessons(tmp_path, src, monkeypatch):
    installed_at(monkeypatch, src)  # version 1 of the course, as installed
    workspace.start(tmp_path / "mine")
    assert manifest(tmp_path / "mine")["from"] == "package"
    newer = tmp_path / "site-packages" / "course" / "lessons_data"  # version 2, installed elsewhere
    for name in ("00_warmup.ipynb", "01_graph.ipynb", "02_hooks.ipynb"):
        write_lesson(newer, name, *sources(src / name)[1:])
    write_lesson(newer, "03_saved_tensors.ipynb", "y = 2")
    installed_at(monkeypatch, newer)
    assert kinds(workspace.update(tmp_path / "mine")) == {"03_saved_tensors.ipynb": "new"}


def test_a_copy_holds_the_language_report_of_the_kernel_that_opens_it(tmp_path):
    """JupyterLab marks a lesson unsaved on opening when the stored report differs from the
    kernel's; `course start` writes the exact report of this Python's ipykernel."""
    import platform

    src = tmp_path / "src"
    write_lesson(src, "00_warmup.ipynb", "x = 1")
    workspace.start(tmp_path / "mine", source=src)
    info = json.loads((tmp_path / "mine" / "00_warmup.ipynb").read_text())["metadata"]["language_info"]
    assert info["name"] == "python" and info["version"] == platform.python_version(), info
