"""Does the `course` command answer --version and doctor, and name the fix for problems?"""

import subprocess
import sys

import course
from course import cli, doctor


def test_version_prints_the_package_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"course {course.__version__}"


def test_unknown_command_is_an_error_that_lists_the_commands(capsys):
    assert cli.main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'nope'" in err and "doctor" in err


def test_doctor_reports_torch_cuda_and_widgets(capsys):
    rc = doctor.main([])
    out = capsys.readouterr().out
    assert "torch: 2.13" in out and "supported" in out
    assert "cuda:" in out
    assert "jupyterlab widgets extension" in out
    assert rc == (0 if all(f.ok for f in doctor.findings()) else 1)


def test_doctor_names_the_fix_for_an_unsupported_torch(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.99.0")
    finding = doctor.check_torch()
    assert not finding.ok
    assert "pip install torch==2.13.0" in finding.fix
    assert "2.99.0" in finding.detail


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
