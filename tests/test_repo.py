"""Do the README, CI script, pyproject and Binder files agree with each other?"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

import course

ROOT = Path(__file__).resolve().parents[1]


def _block(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)\n```\s*<!-- /{marker} -->", text, re.S)
    assert m, f"README.md has no {marker} block"
    return m.group(1).strip()


def test_readme_has_an_open_command_and_a_test_command():
    assert "course lab" in _block("open-command")
    assert "pytest" in _block("test-command")


def test_ci_runs_exactly_the_readme_test_command():
    assert "cmd=$(.ci/readme-test-command)" in (ROOT / ".ci/run").read_text()
    extracted = subprocess.run([ROOT / ".ci/readme-test-command"], capture_output=True, text=True, check=True)
    assert extracted.stdout.strip() == _block("test-command")


def test_pinned_torch_everywhere_is_inside_the_supported_range():
    pins = re.findall(r"torch==([0-9.]+)", _block("open-command") + _block("test-command"))
    pins += re.findall(r"^torch==([0-9.]+)", (ROOT / "binder/requirements.txt").read_text(), re.M)
    assert pins, "expected explicit torch pins (an unpinned torch pulls a multi-GB CUDA build)"
    for pin in pins:
        assert Version(pin) in course.SUPPORTED_TORCH, pin


def test_pyproject_torch_range_is_the_supported_range():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch_req,) = [Requirement(d) for d in deps if d.startswith("torch")]
    assert torch_req.specifier == course.SUPPORTED_TORCH


def test_the_ci_grading_example_parses_and_uses_only_real_grade_options():
    yaml = __import__("yaml")
    workflow = yaml.safe_load((ROOT / "docs/ci-grading-example.yml").read_text())
    runs = [step.get("run", "") for step in workflow["jobs"]["grade"]["steps"]]
    (grade,) = [r for r in runs if "course grade" in r]
    options = set(re.findall(r"(--[a-z-]+|-j)\b", grade))
    helptext = subprocess.run([sys.executable, "-m", "course", "grade", "--help"],
                              capture_output=True, text=True, check=True).stdout
    assert options and all(opt in helptext for opt in options), options
