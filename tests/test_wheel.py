"""Is `pip install` the whole course? The wheel and the sdist carry the lessons, and an install
from the wheel, outside any checkout, starts a course folder and grades it."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import setuptools
import tomllib

from course import __version__

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_subpackage_of_course_goes_into_the_wheel():
    """pyproject lists the packages (so it can add the notebooks as course.lessons_data); a new
    subpackage of course/ must be listed too, or the wheel would ship without it."""
    found = set(setuptools.find_packages(str(ROOT), include=["course", "course.*"]))
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == {"course.lessons_data"}
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"course.lessons_data": "notebooks"}


def test_the_metadata_an_index_expects():
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    assert "Copyright (c) 2026, the autograd-course authors" in (ROOT / "LICENSE").read_text()
    assert any(c.startswith("Intended Audience :: Education") for c in project["classifiers"])
    assert "example.invalid" not in str(project.get("urls", {}))  # none made up (tests/test_repo.py)
    [torch] = [d for d in project["dependencies"] if d.startswith("torch")]
    assert torch.removeprefix("torch") in project["description"]  # the supported range, said up front


def _build(tree: Path, out: Path, kind: str) -> Path:
    """Run setuptools' PEP 517 hook in ``tree`` (what `pip wheel --no-build-isolation` and
    `python -m build --no-isolation` call), in a fresh process."""
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def _checkout_copy(dest: Path) -> Path:
    """What the sdist is built from: the files git tracks that the build reads."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("course", "notebooks"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


def _venv_with_the_wheel(wheel: Path, where: Path) -> Path:
    """A fresh venv holding the wheel; torch and the other dependencies come from this test's
    environment through a .pth line (a path only: its editable install of `course` stays out)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "zz_test_environment.pth").write_text("\n".join(ours) + "\n")
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--ignore-installed",
            "--disable-pip-version-check",
            "--quiet",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    return where / "bin"


@pytest.mark.slow
def test_the_wheel_built_from_the_sdist_is_the_whole_course(tmp_path):
    tree = _checkout_copy(tmp_path / "checkout")
    sdist = _build(tree, tmp_path / "dist", "sdist")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
        names = tar.getnames()
    lessons = sorted(p.name for p in (tree / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {n.split("/", 1)[-1] for n in names} >= {f"notebooks/{n}" for n in lessons} | {"LICENSE"}
    [unpacked] = (tmp_path / "unpacked").iterdir()
    wheel = _build(unpacked, tmp_path / "dist", "wheel")  # from the sdist: it holds all a wheel needs
    with zipfile.ZipFile(wheel) as zf:
        shipped = {Path(n).name: zf.read(n) for n in zf.namelist() if n.startswith("course/lessons_data/")}
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert shipped == {n: (tree / "notebooks" / n).read_bytes() for n in lessons}
    assert (
        "License-Expression: BSD-3-Clause" in metadata
        and "Classifier: Intended Audience :: Education" in metadata
    )

    bin_dir = _venv_with_the_wheel(wheel, tmp_path / "venv")
    away = tmp_path / "elsewhere"  # no checkout here or above
    away.mkdir()

    def course(*args: str, rc: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(bin_dir / "course"), *args],
            cwd=away,
            capture_output=True,
            text=True,
            timeout=300,
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert done.returncode == rc, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import course; print(course.__file__)"],
        cwd=away,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(tmp_path / "venv"))  # the wheel's course, not the checkout's
    assert course("--version").stdout.startswith(f"course {__version__} ({len(lessons)} lessons: 00_warmup")
    out = course("start", "mine").stdout
    assert f"copied {len(lessons)} lessons into mine" in out
    assert sorted(p.name for p in (away / "mine").glob("*.ipynb")) == lessons
    assert "0 of" in course("progress", "mine").stdout
    report = course("grade", "mine/00_warmup.ipynb", "--no-run", rc=1).stdout  # 1: not everything passed
    assert "0.1" in report and "not attempted" in report and "passed" not in report.split("\n", 1)[1]
    (away / "solved").mkdir()  # a learner's finished lesson: the solution notebook, from the checkout
    shutil.copy2(ROOT / "solutions" / "00_warmup.ipynb", away / "solved" / "00_warmup.ipynb")
    solved = course("grade", "solved/00_warmup.ipynb").stdout  # with the headless run: a kernel of this venv
    assert "not attempted" not in solved and "notebook run: " in solved and " 0 raised" in solved
    assert "everything is up to date" in course("update", "mine").stdout


def _recipe() -> str:
    """The instructor guide's build recipe, as written there."""
    text = (ROOT / "docs/instructor-guide.md").read_text()
    m = re.search(r"<!-- build-recipe -->\s*```bash\n(.*?)\n\s*```\s*<!-- /build-recipe -->", text, re.S)
    assert m, "docs/instructor-guide.md has no build-recipe block"
    return "\n".join(line.strip() for line in m.group(1).splitlines())


@pytest.mark.slow
def test_the_guides_build_recipe_works_where_a_stale_build_folder_lies(tmp_path):
    """The recipe runs as written in a checkout holding what an earlier `pip wheel .` leaves:
    a build/ folder (which plain `python -m build` takes for the build package when that is not
    installed) with a module in build/lib/ that the sources no longer have. It installs its own
    tools, and the wheel it makes holds the lessons and not the stale module."""
    tree = _checkout_copy(tmp_path / "checkout")
    (tree / "build" / "lib" / "course").mkdir(parents=True)
    (tree / "build" / "lib" / "course" / "stale_module.py").write_text("STALE = True\n")
    if importlib.util.find_spec("build") is None:  # the trap is real here: Python imports build/
        trap = subprocess.run([sys.executable, "-m", "build"], cwd=tree, capture_output=True, text=True)
        assert trap.returncode != 0 and "'build' is a package" in trap.stderr, trap.stderr
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _recipe()],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    built = sorted(p.name for p in (tree / "dist").iterdir())
    assert built == [
        f"autograd_course-{__version__}-py3-none-any.whl",
        f"autograd_course-{__version__}.tar.gz",
    ]
    assert done.stdout.count("PASSED") == 2, done.stdout[-2000:]  # twine check --strict, both files
    with zipfile.ZipFile(tree / "dist" / built[0]) as zf:
        names = set(zf.namelist())
    assert "course/stale_module.py" not in names and "course/lab.py" in names
    lessons = {f"course/lessons_data/{p.name}" for p in (tree / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert lessons and lessons <= names
