"""Does the JupyterHub recipe of docs/hub/ work where homes are persistent volumes?

A simulated Zero-to-JupyterHub: the "image" is a venv with the course installed from its
wheel (outside every home, no checkout in it), the "persistent volume" is a folder holding
three learners' homes that outlive their servers, and each server start runs the hook the
recipe's config names (`course hub-start`) with that learner's HOME. A rebuilt image with a
changed lesson is simulated by changing the lesson the image's package carries.
"""

from __future__ import annotations

import json
import subprocess

import pytest

# the wheel-building steps the wheel's own test uses (tests/test_wheel.py)
from test_wheel import _build, _checkout_copy, _venv_with_the_wheel

from course.grading.files import grader_fingerprint
from course.lessons import LESSONS

LEARNERS = ("ada", "grace", "linus")
CHANGED = LESSONS[1].notebook


def _server_start(image_bin, home):
    """What the postStart hook does when a learner's server starts (HOME is their volume)."""
    return subprocess.run(
        [str(image_bin / "course"), "hub-start"],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{image_bin}:/usr/bin:/bin", "HOME": str(home)},
    )


def _cells(path):
    return [("".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


@pytest.mark.slow
def test_three_learners_on_persistent_homes_get_lessons_then_updates_without_losing_work(tmp_path):
    wheel = _build(_checkout_copy(tmp_path / "checkout"), tmp_path / "dist", "wheel")
    image_bin = _venv_with_the_wheel(wheel, tmp_path / "image")
    volume = tmp_path / "volume"
    homes = {name: volume / name for name in LEARNERS}
    for home in homes.values():
        home.mkdir(parents=True)

    # first start: the course imports from the image, the lessons land in each home
    for home in homes.values():
        started = _server_start(image_bin, home)
        assert started.returncode == 0, started.stderr
        assert (
            started.stdout.strip()
            == f"course hub-start: started {home / 'autograd-course'} ({len(LESSONS)} new)"
        )
        where = subprocess.run(
            [str(image_bin / "python"), "-c", "import course; print(course.__file__)"],
            cwd=home,
            capture_output=True,
            text=True,
            check=True,
            env={"HOME": str(home)},
        ).stdout.strip()
        assert where.startswith(str(tmp_path / "image")) and not where.startswith(str(volume))
        assert sorted(p.name for p in (home / "autograd-course").glob("*.ipynb")) == [
            lesson.notebook for lesson in LESSONS
        ]
    for home in homes.values():  # no solutions anywhere in a home
        assert not [p for p in home.rglob("*") if "solutions" in p.name]
        for nb in home.rglob("*.ipynb"):
            assert "### BEGIN SOLUTION" not in nb.read_text(), nb

    # ada works on lesson 01; the others only open theirs
    mine = homes["ada"] / "autograd-course" / CHANGED
    nb = json.loads(mine.read_text())
    nb["cells"].append(
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": "my_notes = 'ada was here'",
        }
    )
    mine.write_text(json.dumps(nb))

    # a rebuilt image: the same course with lesson 01 changed
    [shipped] = (tmp_path / "image").rglob(f"course/lessons_data/{CHANGED}")
    nb = json.loads(shipped.read_text())
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "New in this release."})
    shipped.write_text(json.dumps(nb))

    # second start: ada keeps her edit and gets the new version beside it; the others are updated
    for name, home in homes.items():
        again = _server_start(image_bin, home)
        assert again.returncode == 0, again.stderr
        folder = home / "autograd-course"
        if name == "ada":
            assert again.stdout.startswith(f"course hub-start: updated {folder} (1 offered)")
            assert "my_notes = 'ada was here'" in _cells(folder / CHANGED)
            assert "New in this release." not in _cells(folder / CHANGED)
            assert "New in this release." in _cells(folder / f"updated-{CHANGED}")
        else:
            assert again.stdout.strip() == f"course hub-start: updated {folder} (1 updated)"
            assert "New in this release." in _cells(folder / CHANGED)
        log = (folder / ".course" / "hub-start.log").read_text().splitlines()
        assert [line.split(" UTC ", 1)[1].split(" ")[0] for line in log] == ["started", "updated"]

    # one course, one fingerprint: the wheel (lessons inside the package) and this checkout
    # (lessons beside it) are the same grader, so `course collect` flags no report for regrade
    wheel_print = subprocess.run(
        [
            str(image_bin / "python"),
            "-I",
            "-c",
            "from course.grading.files import grader_fingerprint as f; print(f())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert wheel_print.stdout.strip() == grader_fingerprint(), wheel_print.stderr

    # a damaged folder does not stop the server: the hook exits 0 and names `course doctor`
    (homes["linus"] / "autograd-course" / ".course" / "manifest.json").write_text("{")
    broken = _server_start(image_bin, homes["linus"])
    assert broken.returncode == 0 and "is damaged" in broken.stderr and "course doctor" in broken.stderr


def test_the_image_leaves_no_root_owned_file_for_the_notebook_user_to_remove():
    """The Dockerfile's last stage runs as the notebook user: a wheel COPY'd into /tmp is
    root's, and removing it failed the build. The wheel is mounted for the install instead."""
    from pathlib import Path

    steps = (Path(__file__).resolve().parents[1] / "docs" / "hub" / "Dockerfile").read_text()
    final = steps.split("FROM quay.io/jupyter/")[1]
    assert "COPY --from=wheel" not in final and "rm /tmp" not in final
    assert "--mount=type=bind,from=wheel,source=/dist,target=/wheels" in final
    assert "pip install --no-cache-dir /wheels/autograd_course-*.whl" in final
