"""Do the agendas in the instructor guide fit their day, follow the prerequisites, and give
each lesson the room time that course.lessons' measured times imply?

The oracle for a lesson's minutes is the rule of NOTE [Room time] recomputed here from
``course.lessons`` with exact fractions: the middle of (1.3 x fastest, 1.5 x slowest),
to the nearest 5 minutes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import agenda
from course.checks import all_exercises, load_all
from course.lessons import get

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "instructor-guide.md"
ROW = re.compile(r"^\| (\d\d):(\d\d) \| (.+?) \| (\d+) \| (.*?) \|$")


def _expected_minutes(number: int) -> int:
    low, high = get(number).minutes
    middle = (Fraction(13, 10) * low + Fraction(3, 2) * high) / 2
    fives = middle / 5
    return 5 * (int(fives) + (1 if fives - int(fives) >= Fraction(1, 2) else 0))


def _tables() -> dict[str, list[tuple[int, str, int, str]]]:
    """Each agenda table of the guide: (start minute, what, minutes, range column) rows."""
    tables, title = {}, None
    for line in GUIDE.read_text().splitlines():
        if line.startswith("### "):
            title = line[4:].split(":")[0]
            tables[title] = []
        elif title and (m := ROW.match(line)):
            tables[title].append((int(m[1]) * 60 + int(m[2]), m[3], int(m[4]), m[5]))
    return tables


@pytest.mark.parametrize("plan", agenda.AGENDAS, ids=lambda a: a.key)
def test_the_guide_gives_each_lesson_its_room_time_from_course_lessons(plan):
    rows = _tables()[plan.title]
    per_lesson = defaultdict(int)
    for _, what, minutes, stated in rows:
        if m := re.match(r"Lesson (\d\d): (.+?)( \(part \d of \d\))?$", what):
            number = int(m[1])
            assert m[2] == get(number).title
            low, high = get(number).minutes
            assert stated == f"{-(-low * 13 // 10)}-{-(-high * 3 // 2)} ({get(number).time_text.split()[0]})"
            per_lesson[number] += minutes
    assert list(per_lesson) == plan.lessons
    assert dict(per_lesson) == {n: _expected_minutes(n) for n in plan.lessons}


@pytest.mark.parametrize("plan", agenda.AGENDAS, ids=lambda a: a.key)
def test_the_day_runs_without_gaps_and_ends_in_time(plan):
    rows = _tables()[plan.title]
    starts = [start for start, *_ in rows]
    assert starts[0] == int(plan.start[:2]) * 60 + int(plan.start[3:])
    for (start, _, minutes, _), (following, *_) in zip(rows, rows[1:]):
        assert start + minutes == following
    end = rows[-1][0] + rows[-1][2]
    hours, minutes = map(int, plan.end.split(":"))
    assert end <= hours * 60 + minutes
    breaks = [what for _, what, _, _ in rows if what.startswith("*")]
    assert len(breaks) == len(plan.breaks)
    if end - starts[0] > 6 * 60:
        assert "*Lunch*" in breaks


@pytest.mark.parametrize("plan", agenda.AGENDAS, ids=lambda a: a.key)
def test_every_lesson_comes_after_what_it_needs(plan):
    done = set(plan.at_home)
    for number in plan.lessons:
        assert set(get(number).needs) <= done, (number, get(number).needs, done)
        done.add(number)
    for number in plan.homework:
        assert set(get(number).needs) <= done | set(plan.homework), number


@pytest.mark.parametrize("plan", agenda.AGENDAS, ids=lambda a: a.key)
def test_what_goes_home_when_late_are_exercises_of_the_lessons_taught(plan):
    load_all()
    taught = {ex.id for n in plan.lessons for ex in all_exercises(n)}
    assert plan.if_late and set(plan.if_late) <= taught


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 120), min_size=1, max_size=6),
    gaps=st.lists(st.integers(0, 200), max_size=3),
    pauses=st.lists(st.integers(5, 60), min_size=3, max_size=3),
)
def test_a_break_lands_at_its_time_or_at_a_boundary_near_it(lengths, gaps, pauses):
    """Breaks wanted at least 100 minutes apart (as in a day: coffee, lunch, coffee)."""
    items = tuple((f"item {i}", n) for i, n in enumerate(lengths))
    wanted = [sum(gaps[: i + 1]) + 100 * i for i in range(len(gaps))]
    breaks = tuple(
        (f"{(540 + w) // 60:02d}:{(540 + w) % 60:02d}", p, f"break {i}")
        for i, (w, p) in enumerate(zip(wanted, pauses))
    )
    slots = agenda.schedule(agenda.Agenda("x", "x", "09:00", "23:00", items, breaks))
    for slot, following in zip(slots, slots[1:]):
        assert slot.start + slot.minutes == following.start
    assert sum(s.minutes for s in slots if s.kind != "break") == sum(lengths)
    starts_of_items = (
        {540} | {s.start for s in slots if s.kind != "break"} | {s.start + s.minutes for s in slots}
    )
    placed = [s for s in slots if s.kind == "break"]
    assert [s.what for s in placed] == [label for _, _, label in breaks]
    for slot, (at, _, _) in zip(placed, breaks):
        target = int(at[:2]) * 60 + int(at[3:])
        assert (
            slot.start == target
            or abs(slot.start - target) <= agenda.SNAP
            or slot.start >= 540 + sum(lengths)
        ), (slot, target)
        assert slot.start in starts_of_items
