"""Workshop agendas computed from the lesson list: a full day and a half day, in clock times.

An agenda is a list of items (set-up, a whiteboard introduction, lessons, a wrap-up) and
breaks wanted at given times; :func:`schedule` lays them out and the instructor guide
prints the result (``python -m course.guide`` writes it, so it cannot drift from
``course.lessons``)::

    >>> [(s.clock, s.minutes, s.kind) for s in schedule(HALF_DAY)]  # doctor, whiteboard, 01, coffee, 02, wrap-up
    ... # doctest: +NORMALIZE_WHITESPACE
    [('09:00', 10, 'item'), ('09:10', 15, 'item'), ('09:25', 80, 'lesson'), ('10:45', 15, 'break'),
     ('11:00', 100, 'lesson'), ('12:40', 10, 'item')]

NOTE [Room time]
    1. ``course.lessons`` holds each lesson's (fastest, slowest) time from learners' timed
       walk-throughs, alone. In a room people take 1.3 to 1.5 times as long (questions, a
       neighbour's problem, the instructor's demonstrations): ``ROOM_FACTOR``.
    2. A lesson's room range is (1.3 x fastest, 1.5 x slowest), rounded up to the minute;
       the agenda plans for the middle of that range, rounded to 5 minutes.
    3. At the slow end the room needs more than planned; each agenda names, in order, the
       exercises that then go home (``if_late``). We have no per-exercise timings, so that
       list is an order to cut in, not a computed saving.

NOTE [Where a break goes]
    A break wanted at ``target`` goes at the item boundary nearest to it if that is at most
    ``SNAP`` minutes away (# yes: a lesson ends 10:10, coffee wanted 10:30: coffee at 10:10);
    otherwise the lesson running at ``target`` is split there and goes on after the break
    (# yes: "Lesson 02 (part 1 of 2)" until 12:30, lunch, part 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from course.lessons import LESSONS, get

__all__ = [
    "AGENDAS",
    "FULL_DAY",
    "HALF_DAY",
    "HALF_DAY_COMPILER",
    "Agenda",
    "ROOM_FACTOR",
    "Slot",
    "markdown",
    "planned_minutes",
    "room_range",
    "schedule",
    "totals",
]

ROOM_FACTOR = (1.3, 1.5)
SNAP = 20


def room_range(number: int) -> tuple[int, int]:
    """A lesson's time in a room (NOTE [Room time]).

    >>> room_range(1)  # stated 50-65 minutes
    (65, 98)
    """
    low, high = get(number).minutes
    return math.ceil(low * ROOM_FACTOR[0] - 1e-9), math.ceil(high * ROOM_FACTOR[1] - 1e-9)


def planned_minutes(number: int) -> int:
    """The middle of the room range, to the nearest 5 minutes (halves round up).

    >>> planned_minutes(1)
    80
    """
    low, high = get(number).minutes
    middle = (low * ROOM_FACTOR[0] + high * ROOM_FACTOR[1]) / 2
    return 5 * math.floor(middle / 5 + 0.5)


@dataclass(frozen=True)
class Agenda:
    """What a workshop does, in order. ``items`` are lesson numbers or ``(label, minutes)``."""

    key: str
    title: str
    start: str  # "09:00"
    end: str  # the latest the day may end
    items: tuple[int | tuple[str, int], ...]
    breaks: tuple[tuple[str, int, str], ...]  # (wanted at, minutes, label)
    prework: tuple[str, ...] = ()  # what learners do at home before the day
    at_home: tuple[int, ...] = ()  # lessons learners take alone before the day
    if_late: tuple[str, ...] = ()  # exercise ids that go home first, in order
    homework: tuple[int, ...] = ()  # lessons left for afterwards

    @property
    def lessons(self) -> list[int]:
        return [item for item in self.items if isinstance(item, int)]


@dataclass(frozen=True)
class Slot:
    """One row of a schedule: from ``start`` (minutes after midnight), ``minutes`` long."""

    start: int
    minutes: int
    what: str
    lesson: int | None = None
    kind: str = "item"  # "item", "lesson" or "break"

    @property
    def clock(self) -> str:
        return _clock(self.start)


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def _lesson_label(number: int) -> str:
    return f"Lesson {number:02d}: {get(number).title}"


def schedule(agenda: Agenda) -> list[Slot]:
    """Lay ``agenda`` out from its start, with its breaks (NOTE [Where a break goes])."""
    pieces = []  # (label, minutes, lesson or None)
    for item in agenda.items:
        if isinstance(item, int):
            pieces.append((_lesson_label(item), planned_minutes(item), item))
        else:
            pieces.append((item[0], item[1], None))
    breaks = sorted((_minutes(at), minutes, label) for at, minutes, label in agenda.breaks)
    slots, t = [], _minutes(agenda.start)
    for label, length, lesson in pieces:
        row, left = [], length  # this piece's parts, and the breaks between them
        while left:
            if breaks and breaks[0][0] - t <= min(SNAP, t + left - breaks[0][0]):
                pause = breaks.pop(0)  # the boundary before (the rest of) this piece is the nearest
                row.append(Slot(t, pause[1], pause[2], kind="break"))
                t += pause[1]
                continue
            run = left
            if breaks and t + left - breaks[0][0] > SNAP and breaks[0][0] < t + left:
                run = breaks[0][0] - t  # too far from either boundary: split the piece here
            row.append(Slot(t, run, label, lesson, "lesson" if lesson is not None else "item"))
            t, left = t + run, left - run
        count = sum(s.kind != "break" for s in row)
        if count > 1:
            parts = iter(range(1, count + 1))
            row = [
                s
                if s.kind == "break"
                else Slot(s.start, s.minutes, f"{s.what} (part {next(parts)} of {count})", s.lesson, s.kind)
                for s in row
            ]
        slots += row
    for _at, minutes, label in breaks:  # wanted after the last item: at its end
        slots.append(Slot(t, minutes, label, kind="break"))
        t += minutes
    return slots


def totals() -> str:
    """The whole course in one line: alone (stated times) and in a room (room ranges).

    >>> totals().startswith("The whole course: ") and totals().rstrip().endswith(" in a room.")
    True
    >>> _hours(sum(lesson.minutes[0] for lesson in LESSONS)) in totals()  # the registry's sum
    True
    """
    alone = [sum(lesson.minutes[i] for lesson in LESSONS) for i in (0, 1)]
    room = [sum(room_range(lesson.number)[i] for lesson in LESSONS) for i in (0, 1)]
    return (
        f"The whole course: {_hours(alone[0])} to {_hours(alone[1])} alone, "
        f"{_hours(room[0])} to {_hours(room[1])} in a room.\n"
    )


def _hours(minutes: int) -> str:
    return f"{minutes // 60} h {minutes % 60:02d}"


def markdown(agenda: Agenda) -> str:
    """The agenda as the instructor guide shows it: a table, then what to cut and what goes home."""
    slots = schedule(agenda)
    end = slots[-1].start + slots[-1].minutes
    lines = [f"### {agenda.title}: {agenda.start} to {_clock(end)}", ""]
    before = list(agenda.prework) + [
        f"lesson {n:02d}, {get(n).title} ({get(n).time_text})" for n in agenda.at_home
    ]
    if before:
        lines += ["Before the day, at home: " + "; ".join(before) + ".", ""]
    lines += ["| time | what | min | room range (stated) |", "|---|---|---|---|"]
    for s in slots:
        stated = ""
        if s.lesson is not None:
            low, high = room_range(s.lesson)
            stated = f"{low}-{high} ({get(s.lesson).time_text.replace(' minutes', '')})"
        lines.append(
            f"| {s.clock} | {'*' + s.what + '*' if s.kind == 'break' else s.what} | {s.minutes} | {stated} |"
        )
    planned = sum(planned_minutes(n) for n in agenda.lessons)
    slow = sum(room_range(n)[1] for n in agenda.lessons)
    lines += [
        "",
        f"Lessons {', '.join(f'{n:02d}' for n in agenda.lessons)}: {planned} min planned, "
        f"{slow} min at the slow end of the room range ({slow - planned} more).",
    ]
    if agenda.if_late:
        lines.append(
            "Running late, these exercises go home, in this order: " + ", ".join(agenda.if_late) + "."
        )
    if agenda.homework:
        low = sum(get(n).minutes[0] for n in agenda.homework)
        high = sum(get(n).minutes[1] for n in agenda.homework)
        lines.append(
            f"Homework afterwards: lessons {', '.join(f'{n:02d}' for n in agenda.homework)} "
            f"({_hours(low)} to {_hours(high)} alone, stated times)."
        )
    return "\n".join(lines) + "\n"


_SETUP = "Set-up: everyone runs `course doctor ~/autograd-course` until it says all good"
_GRAPH = "Whiteboard: a tensor, its grad_fn, the edges to the leaves (the graph is data)"
_FX = "Whiteboard: an FX graph (placeholders, call_function nodes, one output)"
_WRAP = "Wrap-up: `course progress`, questions, what goes home"

FULL_DAY = Agenda(
    "full-day",
    "Full day (the autograd track)",
    "09:00",
    "17:00",
    ((_SETUP, 20), (_GRAPH, 20), 0, 1, 2, 3, (_WRAP, 10)),
    (("10:30", 15, "Coffee"), ("12:30", 60, "Lunch"), ("15:00", 15, "Coffee")),
    if_late=("2.3", "3.5", "3.4"),
    homework=tuple(n for n in range(4, len(LESSONS))),
)

HALF_DAY = Agenda(
    "half-day",
    "Half day (graph and hooks)",
    "09:00",
    "13:00",
    (
        ("Set-up: everyone's `course doctor` said all good at home; fix the rest now", 10),
        (_GRAPH, 15),
        1,
        2,
        (_WRAP, 10),
    ),
    (("10:45", 15, "Coffee"),),
    prework=("`course start ~/autograd-course` and `course doctor ~/autograd-course`",),
    at_home=(0,),
    if_late=("2.3", "2.4"),
    homework=(3, 4, 5),  # the rest of the autograd half; 06-09 as after the full day
)

HALF_DAY_COMPILER = Agenda(
    "half-day-compiler",
    "Half day, compiler variant (graph and joint graph)",
    "09:00",
    "13:00",
    (
        ("Set-up: everyone's `course doctor` said all good at home; fix the rest now", 10),
        (_GRAPH, 15),
        1,
        (_FX, 10),
        6,
        (_WRAP, 10),
    ),
    (("10:45", 15, "Coffee"),),
    prework=HALF_DAY.prework,
    at_home=HALF_DAY.at_home,
    if_late=("6.4", "6.3"),
    homework=(7,),
)

AGENDAS = (FULL_DAY, HALF_DAY, HALF_DAY_COMPILER)
