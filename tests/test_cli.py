"""Does the `course` command answer --version and doctor, and name the fix for problems?"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

import course
from course import SUPPORTED_TORCH, cli, doctor
from course.lessons import LESSONS


def test_version_names_the_package_version_and_the_lesson_set(capsys):
    from course.lessons import LESSONS

    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"course {course.__version__} ({len(LESSONS)} lessons: 00_warmup, ")
    assert all(lesson.slug in out for lesson in LESSONS) and "\n" not in out


def test_unknown_command_is_an_error_that_lists_the_commands(capsys):
    assert cli.main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'nope'" in err and "doctor" in err


@pytest.mark.slow
def test_doctor_reports_torch_cuda_and_widgets(capsys):
    rc = doctor.main([])
    out = capsys.readouterr().out
    import torch

    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"  # torch's own record
    assert f"torch: {torch.__version__}, {build} build, is supported ({SUPPORTED_TORCH})" in out
    assert "cuda:" in out
    assert "jupyterlab widgets extension" in out
    assert f"[ok  ] lessons: {len(LESSONS)} lesson notebooks in " in out
    problems = [line for line in out.splitlines() if line.startswith("[") and not line.startswith("[ok")]
    assert rc == (0 if not problems else 1)  # read from this run's lines: asking jupyter again costs 4 s
    assert ("all good" in out) == (not problems)


def test_doctor_names_the_fix_for_an_unsupported_torch(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.99.0")
    finding = doctor.check_torch()
    assert not finding.ok
    pinned = re.search(r"pip install torch==(\S+)", finding.fix)
    assert pinned and Version(pinned.group(1)) in SUPPORTED_TORCH  # it names a release we support
    assert "2.99.0" in finding.detail and str(SUPPORTED_TORCH) in finding.detail


def test_doctor_names_the_cuda_version_of_a_cuda_build(monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert "CUDA 13.0 build" in doctor.check_torch().detail
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "CPU build" in doctor.check_torch().detail


def test_require_supported_torch_raises_a_clear_error(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.99.0")
    try:
        course.require_supported_torch("course.aot.descriptors")
    except course.UnsupportedTorchError as exc:
        assert "course.aot.descriptors" in str(exc) and "2.99.0" in str(exc)
    else:  # pragma: no cover - the assertion is the point of the test
        raise AssertionError("expected UnsupportedTorchError")


def test_console_entry_point_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "course", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("course ")


def test_course_lab_echoes_the_command_it_runs_interpreter_included(tmp_path, monkeypatch, capsys):
    import nbformat

    from course import lab

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "00_first.ipynb")
    execs = []
    monkeypatch.setattr(lab.os, "execv", lambda path, cmd: execs.append(cmd))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/etc/site-jupyter")  # put back after the test
    assert lab.main([str(tmp_path / "ws"), "--source", str(tmp_path), "--", "--no-browser"]) == 0
    echoed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("+ ")]
    config = tmp_path / "ws" / ".course" / "jupyter"
    assert echoed == [
        f"+ JUPYTER_CONFIG_PATH={config}:/etc/site-jupyter {sys.executable} -m jupyter lab "
        f"{tmp_path / 'ws'} --no-browser" + (" --allow-root" if os.geteuid() == 0 else "")
    ]
    assert execs[0][0] == sys.executable and os.environ["JUPYTER_CONFIG_PATH"].startswith(f"{config}:")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""  # not listening yet


def _lab_setting(tmp_path: Path, command: list[str], name: str) -> dict:
    """Start JupyterLab with ``command`` (home and Jupyter's own folders empty, in tmp_path),
    fetch its page and what its settings server says of the notification settings, stop it."""
    import json
    import signal
    import time

    port, token = _free_port(), "course-test-token"
    home = tmp_path / name
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    args = [
        "--no-browser",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.port_retries=0",
    ]
    server = subprocess.Popen(
        [*command, *args],
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(240):  # JupyterLab takes seconds to start on a busy machine; a minute at most
            status, page = _get(f"{base}/lab", token)
            if status or server.poll() is not None:
                break
            time.sleep(0.5)
        assert status == 200 and "JupyterLab" in page, (
            status,
            server.poll() is None or server.stderr.read()[-3000:],
        )
        status, body = _get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification", token)
        assert status == 200, status
        return json.loads(body)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.slow
def test_course_lab_opens_jupyterlab_without_the_news_question(tmp_path):
    """JupyterLab 4 asks "get notified about official Jupyter news?" while its setting
    fetchNews is "none"; the JupyterLab that `course lab` starts answers "false" by default,
    and the learner's own settings are left alone. Asked of JupyterLab's settings server."""
    import nbformat

    from course import lab

    (tmp_path / "lessons").mkdir()
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "lessons" / "00_first.ipynb")
    ours = _lab_setting(
        tmp_path, [sys.executable, "-m", "course", "lab", "ws", "--source", "lessons", "--"], "a"
    )
    # The page computes a setting as the learner's value, else the schema's default; the settings
    # server hands out the schema with the overrides' defaults in it.
    assert ours["schema"]["properties"]["fetchNews"]["default"] == "false", ours["schema"]["properties"]
    assert ours["settings"] == {} and ours["raw"] == "{}"  # nothing written in the learner's settings
    plain = _lab_setting(
        tmp_path, lab.jupyter_command(Path("ws"), [], is_root=os.geteuid() == 0), "b"
    )  # no course lab
    assert plain["schema"]["properties"]["fetchNews"]["default"] == "none"  # JupyterLab's own: it asks


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """`course start DIR | head -1`: the reader has gone; the command stops without a traceback."""
    import nbformat

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "00_first.ipynb")
    for args in (
        ["start", str(tmp_path / "ws"), "--source", str(tmp_path)],
        ["progress", str(tmp_path / "ws")],
    ):
        read_end, write_end = os.pipe()
        os.close(read_end)  # nobody will ever read: every write fails with EPIPE
        try:
            out = subprocess.run(
                [sys.executable, "-m", "course", *args],
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
        finally:
            os.close(write_end)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert (tmp_path / "ws" / "00_first.ipynb").exists()  # start did its work before printing


def test_doctor_says_when_the_install_carries_no_lessons(monkeypatch, tmp_path):
    from course import lessons

    monkeypatch.setattr(lessons, "notebook_folders", lambda: [tmp_path / "lessons_data"])
    finding = doctor.check_lessons()
    assert not finding.ok and "reinstall" in finding.fix


def test_is_the_supported_range_stated_alike_everywhere():
    """pyproject's dependency and description, README and the instructor guide: SUPPORTED_TORCH?"""
    from packaging.specifiers import SpecifierSet

    root = Path(__file__).resolve().parents[1]
    texts = {
        name: (root / name).read_text()
        for name in ("pyproject.toml", "README.md", "docs/instructor-guide.md")
    }
    stated = {
        (name, m.group(1))
        for name, text in texts.items()
        for m in re.finditer(r"torch ?`?(>=[\d.]+,<[\d.]+)", text)
    } | {
        (name, m.group(1)) for name, text in texts.items() for m in re.finditer(r"`(>=[\d.]+,<[\d.]+)", text)
    }
    assert {name for name, _ in stated} == set(texts)
    for name, spec in stated:
        assert SpecifierSet(spec) == SUPPORTED_TORCH, (name, spec)


def test_grade_on_a_file_that_is_not_a_notebook_says_so(tmp_path):
    """Not `KeyError: 'cells'` (issue 48): a usage error for a file that is not a .ipynb, and
    a report that names the reason for a .ipynb that holds no notebook."""
    import subprocess
    import sys

    (tmp_path / "notes.txt").write_text("my notes")
    run = [sys.executable, "-I", "-m", "course", "grade"]
    done = subprocess.run([*run, tmp_path / "notes.txt"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "is not a notebook (.ipynb)" in done.stderr, done.stderr
    (tmp_path / "00_warmup.ipynb").write_text('{"nbformat": 4}')
    done = subprocess.run(
        [*run, tmp_path / "00_warmup.ipynb", "--no-run", "-q"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "not a Jupyter notebook: its JSON has no list of cells" in done.stdout
    assert "KeyError" not in done.stdout
