"""Do the README, CI script, pyproject and Binder files agree with each other?"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

import course

ROOT = Path(__file__).resolve().parents[1]


def _block(marker: str, doc: str = "README.md") -> str:
    text = (ROOT / doc).read_text()
    m = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)\n```\s*<!-- /{marker} -->", text, re.S)
    assert m, f"{doc} has no {marker} block"
    return m.group(1).strip()


def _wheel_install() -> str:
    return _block("wheel-install", "docs/install.md")  # the README links it; the lines live there


def test_readme_has_an_open_command_and_a_test_command():
    assert "course lab" in _block("open-command")
    assert "pytest" in _block("test-command")


def test_ci_runs_exactly_the_readme_test_command():
    assert "cmd=$(.ci/readme-test-command)" in (ROOT / ".ci/run").read_text()
    assert "-m guides tests/test_guides.py" in (ROOT / ".ci/run").read_text()  # the guides' grading blocks
    extracted = subprocess.run([ROOT / ".ci/readme-test-command"], capture_output=True, text=True, check=True)
    assert extracted.stdout.strip() == _block("test-command")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's alone")
def test_ci_reaps_the_orphans_of_the_command_and_ends_what_it_left_running(tmp_path):
    """.ci/reap adopts what the command orphans (5 short sleeps, 1 long one), reaps all,
    ends the sleeper, and exits with the command's own status."""
    script = "for i in 1 2 3 4 5; do (sleep 0.3 &); done; (sleep 600 & echo $! > sleeper); exit 3"
    done = subprocess.run(
        [sys.executable, ROOT / ".ci/reap", "bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    counts = re.search(r"reap: (\d+) orphaned processes reaped; (\d+) left running were ended", done.stderr)
    assert counts, done.stderr
    # Each `sleep` outlives the subshell that started it, so all 6 are adopted and reaped; how
    # many short ones were still running when the command ended depends on timing.
    assert int(counts[1]) == 6 and 1 <= int(counts[2]) <= 6, done.stderr
    sleeper = int((tmp_path / "sleeper").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(sleeper, 0)  # gone, and reaped: not even a zombie holds its PID


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
    helptext = subprocess.run(
        [sys.executable, "-m", "course", "grade", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert options and all(opt in helptext for opt in options), options


def _guide_block(marker: str) -> str:
    text = (ROOT / "docs/instructor-guide.md").read_text()
    m = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)\n\s*```\s*<!-- /{marker} -->", text, re.S)
    assert m, f"docs/instructor-guide.md has no {marker} block"
    return "\n".join(line.strip() for line in m.group(1).splitlines())


def _lines(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if line.strip()]


def _holds(script: str, block: list[str]) -> bool:
    """Does ``script`` run the lines of ``block`` one after the other, as they are written?"""
    lines = _lines(script)
    return any(lines[i : i + len(block)] == block for i in range(len(lines)))


def _workflows() -> tuple[list[str], list[str]]:
    """The shell scripts of the GitHub release workflow's steps and of the GitLab example's jobs."""
    yaml = __import__("yaml")
    github = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    gitlab = yaml.safe_load((ROOT / "docs/release-gitlab-example.yml").read_text())
    steps = [s.get("run", "") for s in github["jobs"]["release"]["steps"]]
    scripts = [
        "\n".join(job["script"]) for job in gitlab.values() if isinstance(job, dict) and "script" in job
    ]
    return steps, scripts


def test_the_release_workflows_build_with_the_guides_recipe_and_install_as_the_readme_says():
    """Both release files run the instructor guide's build recipe and the README's install
    commands word for word (all but `course lab`, which waits for a browser), then attach the
    files to the tag's release."""
    recipe = _lines(_guide_block("build-recipe"))
    install = _lines(_wheel_install())
    assert install[-1].endswith("course lab ~/autograd-course")
    for scripts in _workflows():
        assert any(_holds(s, recipe) for s in scripts) and any(_holds(s, install[:-1]) for s in scripts)
    yaml = __import__("yaml")
    github = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    assert github[True]["push"]["tags"] == ["v*"] and github["permissions"] == {
        "contents": "write"
    }  # `on:` reads as True
    steps, scripts = _workflows()
    assert any("gh release upload" in s and "dist/autograd_course-*" in s for s in steps)
    gitlab = yaml.safe_load((ROOT / "docs/release-gitlab-example.yml").read_text())
    links = gitlab["release"]["release"]["assets"]["links"]
    assert [link["name"] for link in links] == [
        "autograd_course-${VERSION}-py3-none-any.whl",
        "autograd_course-${VERSION}.tar.gz",
    ]
    assert any("--upload-file" in s for s in scripts)


def test_the_guides_and_readmes_commands_pin_a_supported_torch_from_the_cpu_index():
    for block in (_wheel_install(), _guide_block("build-recipe")):
        for pin in re.findall(r"torch==([0-9.]+)", block):
            assert Version(pin) in course.SUPPORTED_TORCH, pin
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in _wheel_install()
    assert (
        "https://download.pytorch.org/whl/cpu" in (ROOT / "binder/requirements.txt").read_text()
    )  # Binder's choice too


#: How a document can name a version of the course: a file or requirement (autograd_course-0.1.0,
#: autograd-course==0.1.0), `course --version`'s words (course 0.1.0), a tag (tag v0.1.0).
_NAMED_VERSION = re.compile(
    r"autograd[_-]course(?:-|==|\s)v?(\d+\.\d+(?:\.\d+)*)\b|\bcourse (\d+\.\d+\.\d+)\b"
    r"|\btags? v(\d+\.\d+\.\d+)\b"
)


def _versions_named(text: str) -> set[str]:
    return {next(filter(None, m.groups())) for m in _NAMED_VERSION.finditer(text)}


def test_no_document_names_a_version_other_than_course_version():
    """The version is stated once (course.__version__, which pyproject reads); a document says
    X.Y.Z or names that version, never another one (the README said 0.1.0, the guide 0.2.0)."""
    assert _versions_named(
        "pip install autograd_course-0.2.0-py3-none-any.whl; course 0.3.1; tag v1.0.0"
    ) == {"0.2.0", "0.3.1", "1.0.0"}  # the check sees each way of naming one
    documents = [
        ROOT / "README.md",
        ROOT / "pyproject.toml",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs").glob("*.yml")),
        *sorted((ROOT / ".github").rglob("*.yml")),
        *sorted((ROOT / "binder").iterdir()),
    ]
    named = {(str(p.relative_to(ROOT)), v) for p in documents for v in _versions_named(p.read_text())}
    assert all(v == course.__version__ for _, v in named), sorted(named)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "course.__version__"}


def test_no_made_up_addresses():
    """A project address must lead somewhere: none is invented, and the guide says what to fill in."""
    texts = {
        p: p.read_text() for p in [ROOT / "pyproject.toml", ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    }
    assert not [p.name for p, text in texts.items() if "example.invalid" in text]
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("urls", {})
    assert not [u for u in urls.values() if re.search(r"example\.|<|your-org", u)], urls
    guide = (ROOT / "docs/instructor-guide.md").read_text()
    assert "[project.urls]" in guide and all(f"{key} = " in guide for key in ("Homepage", "Source", "Issues"))


def test_the_command_table_names_every_subcommand_learners_first():
    """One row per `course` subcommand (course.cli.SUBCOMMANDS is the list) in docs/commands.md,
    under the heading `course --help` gives it: a new command without a row fails here, naming
    the row to add; the learners' commands come first in both."""
    from course.cli import AUDIENCES, SUBCOMMANDS, usage

    text = (ROOT / "docs/commands.md").read_text()
    missing = [name for name in SUBCOMMANDS if f"| `course {name}" not in text]
    assert missing == [], (
        f"docs/commands.md has no row for: {missing} (add `| `course NAME ...` | what it does |`)"
    )
    headings = [f"## {heading[0].upper()}{heading[1:]}" for heading, _ in AUDIENCES]
    assert [text.index(h) for h in headings] == sorted(text.index(h) for h in headings)
    for (heading, first), after in zip(AUDIENCES, [*headings[1:], None]):
        section = text[
            text.index(f"## {heading[0].upper()}{heading[1:]}") : text.index(after) if after else None
        ]
        assert f"| `course {first}" in section, (heading, first)
    usage = usage()
    assert usage.index("for learners:") < usage.index("for instructors:") < usage.index("for authors:")
    assert "course --help" in (ROOT / "README.md").read_text()  # the README points at both
