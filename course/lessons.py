"""The course's lessons in order: what each teaches, how long it takes, what it needs.

One table feeds the README's course overview, the instructor guide and `course progress`,
so the three cannot disagree. `tests/test_lessons.py` checks that every lesson here has a
solution notebook, a learner copy and a checks module, and that the generated docs are current.

Example:
    >>> [lesson.slug for lesson in LESSONS][:2]
    ['00_warmup', '01_autograd_graph']
    >>> get(3).title
    'Saved tensors'
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LESSONS",
    "Lesson",
    "check_files",
    "exercise_file",
    "exercise_module",
    "get",
    "lesson_set",
    "notebook_folders",
    "registered_exercises",
    "registrations_in",
]


@dataclass(frozen=True)
class Lesson:
    number: int
    slug: str  # notebooks/<slug>.ipynb, solutions/<slug>.ipynb
    title: str
    minutes: tuple[int, int]  # (fastest, slowest) learner's time, reading and exercises included
    objectives: tuple[str, ...]
    needs: tuple[int, ...]  # lessons to take first
    reads: tuple[str, ...]  # the course modules the lesson reads side by side with torch's
    # the headings worth showing a room, in order: `course slides` (NOTE [Which cells become slides])
    key_cells: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.minutes, int):  # one figure: a lesson nobody has timed yet
            object.__setattr__(self, "minutes", (self.minutes, self.minutes))

    @property
    def notebook(self) -> str:
        return f"{self.slug}.ipynb"

    @property
    def time_text(self) -> str:
        """The time as the overview and the lesson's opening state it.

        >>> get(1).time_text
        '50-65 minutes'
        """
        low, high = self.minutes
        return f"{low} minutes" if low == high else f"{low}-{high} minutes"


# NOTE [How the lesson times were measured]
# Two learners worked through every lesson with a clock and reported their times in the
# issue tracker. Lessons 00-04 took them 4 h 25 to 6 h together (3 h 25 was the
# old estimate): we split that range over the five lessons in proportion to their length,
# giving more to the parts both named as the long ones (exercise 2.3, exercise 3.4 and the
# reading of lesson 04). Lessons 05-08 were timed one by one (70-90, 60-75, 100-120 and
# 60-80 minutes; lesson 07's descriptor zoo is its long part). Each lesson states its range
# as (fastest, slowest); a new lesson may give one figure until someone has timed it.
# Lessons 09, 10 and 11 were one lesson (the old 09) when two learners timed it: 120-205
# minutes (issue 50: 2 h careful, 3 h 25 typical). Nobody has timed the three apart, so we
# timed a walk-through of each by a model-based learner that read every cell in order, ran
# every code cell, and answered every exercise until its check passed without opening the
# solutions (benchmarks/walk_through.py; its logs are in benchmarks/walk_throughs/). The same
# protocol on the old lesson 09, as the two learners saw it (commit 8b0c3f9), took 184 s: 1 s
# of it stands for 39 to 67 s of a person. The walk-throughs took 96 s (09), 108 s (the cells
# now in 10) and 110 s (the cells now in 11); lesson 10's torchtitan section came after its
# walk-through and is counted at 5-10 minutes of reading. A model reads far faster than a
# person and not in proportion, so this is an estimate from a timed walk-through, not a
# person's time. Cross-check: scaling the old lesson's minutes by prose words gives 78-134
# (09), 107-184 (10) and 58-100 (11).


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        0,
        "00_warmup",
        "Warm-up: requires_grad, grad_fn, backward",
        (20, 25),
        (
            "make a leaf that requires grad and read its .grad after backward",
            "see a grad_fn appear on every result of an op",
            "predict what two backward passes do to .grad",
        ),
        (),
        (),
        key_cells=(
            "Leaves and `requires_grad`",
            "Results carry a `grad_fn`",
            "`.backward()` and a leaf's `.grad`",
            "Exercise 0.1",
            "Exercise 0.2",
        ),
    ),
    Lesson(
        1,
        "01_autograd_graph",
        "The autograd graph",
        (50, 65),
        (
            "walk a graph through grad_fn, Node.name() and next_functions",
            "tell AccumulateGrad leaves from interior nodes",
            "take gradients with respect to a GradientEdge",
            "predict which in-place ops break backward, from version counters",
        ),
        (0,),
        ("course/autograd/graph.py",),
        key_cells=(
            "A small MLP and its graph",
            "Every `grad_fn` is a `Node`",
            "Leaves and `AccumulateGrad`",
            "Exercise 1.1",
            "Watching backward run",
            "Gradient edges",
            "Exercise 1.2",
            "Version counters",
        ),
    ),
    Lesson(
        2,
        "02_hooks",
        "Hooks",
        (60, 80),
        (
            "order tensor hooks, node pre-hooks and post-hooks",
            "clip gradients with a hook",
            "use register_multi_grad_hook in modes all and any, with inputs=",
            "read the engine's whole-graph logging",
        ),
        (1,),
        ("course/autograd/hooks.py",),
        key_cells=(
            "Tensor hooks",
            "Node hooks, and the order",
            "Exercise 2.1",
            "Exercise 2.2",
            "`register_multi_grad_hook`",
            "Exercise 2.3",
            "Hooks on nodes as they are made",
        ),
    ),
    Lesson(
        3,
        "03_saved_tensors",
        "Saved tensors",
        (75, 105),
        (
            "read what each op saves (_saved_* attributes)",
            "write pack and unpack hooks, nested and disabled",
            "count saved bytes per storage",
            "compress saved tensors under a memory budget",
        ),
        (1,),
        ("course/autograd/saved_tensors.py",),
        key_cells=(
            "What an op saves",
            "Pack and unpack hooks",
            "Unpack may run more than once",
            "Nesting",
            "How much memory do saved tensors keep alive?",
            "Compressing saved tensors",
        ),
    ),
    Lesson(
        4,
        "04_offload",
        "Activation offloading",
        (60, 85),
        (
            "see why activations dominate training memory",
            "implement save_on_cpu and a size-threshold offloader",
            "predict step time with a timing model of overlapped copies",
            "measure offload strategies with the benchmark harness",
        ),
        (3,),
        ("course/offload/offloader.py", "course/offload/model.py", "course/offload/bench.py"),
        key_cells=(
            "1. What backward keeps",
            "3. Offload only what pays",
            "4. When are the copies free?",
            "6. Measured on this machine",
        ),
    ),
    Lesson(
        5,
        "05_mutation",
        "Mutating saved tensors",
        (70, 90),
        (
            "explain the 'modified by an inplace operation' error",
            "follow allow_mutation_on_saved_tensors: pack, clone-before-mutate, unpack",
            "find why torch 2.13 misses a mutated offset view, and fix it",
        ),
        (1, 3),
        ("course/autograd/mutation.py",),
        key_cells=(
            "The error we want to avoid",
            "How it works",
            "Step through a forward pass",
            "Exercise 5.1",
        ),
    ),
    Lesson(
        6,
        "06_joint_graph",
        "Building the joint graph",
        (60, 75),
        (
            "step through AOTAutograd's stages: trace, functionalize, tangents, joint, partition",
            "build a joint graph by hand with make_fx",
            "predict a module's placeholders and find input-mutation outputs",
        ),
        (1,),
        ("course/aot/joint.py", "course/aot/steps.py"),
        key_cells=(
            "One call, two exporters",
            "A joint function, by hand",
            "Stage 1:",
            "Stage 2:",
            "Stage 3:",
            "Exercise 6.2",
            "Stage 4:",
            "Stages 6 and 7:",
        ),
    ),
    Lesson(
        7,
        "07_descriptors",
        "Descriptors and fx_utils",
        (100, 120),
        (
            "name every placeholder and output of a joint graph by its descriptor",
            "pair parameters with gradients and outputs with tangents",
            "write and test a joint-graph pass",
            "tell which program makes each of the 31 descriptor classes, and why AOTAutograd needs it",
        ),
        (6,),
        ("course/aot/descriptors.py", "course/aot/fx_utils.py"),
        key_cells=(
            "A joint graph and its descriptors",
            "A descriptor is a value, and a path",
            "The order of the placeholders",
            "The taxonomy",
            "Pairing:",
            "Writing a pass",
            "The descriptor zoo",
        ),
    ),
    Lesson(
        8,
        "08_capstone",
        "Capstone: a memory-budgeted training step",
        (60, 80),
        (
            "measure saved bytes per layer",
            "choose what to offload under a budget, with gradients unchanged",
            "explain the joint graph of the step",
        ),
        (3, 4, 6, 7),
        ("course/offload/offloader.py", "course/aot/joint.py"),
        key_cells=(
            "The model and the budget",
            "Exercise 8.1",
            "The same step as a joint graph",
        ),
    ),
    Lesson(
        9,
        "09_memory_policies",
        "Memory policies: recompute or offload, with saved-tensor hooks",
        (62, 107),  # a timed walk-through, calibrated on the old lesson 09 (NOTE above)
        (
            "write checkpointing as a pair of saved-tensor hooks and predict what it reruns",
            "write a selective-checkpointing policy and measure its memory and recompute",
            "measure keep, recompute and offload with torch.profiler and match the counted bytes",
        ),
        (3, 4, 8),
        (
            "course/autograd/checkpoint.py",
            "course/autograd/selective.py",
        ),
        key_cells=(
            "1. Recompute instead of store",
            "The course's checkpoint, beside torch's",
            "Exercise 9.2",
            "3. Measure, don't only count",
        ),
    ),
    Lesson(
        10,
        "10_compiler_memory",
        "The compiler's memory decisions: partitioners, budget, min-cut",
        (75, 130),  # a timed walk-through, calibrated on the old lesson 09 (NOTE above)
        (
            "read what torch's partitioners save, and sweep activation_memory_budget",
            "predict why min-cut may not recompute each node, read from torch's own flow graph",
            "write the budget's knapsack and plug it into torch as its solver",
        ),
        (6, 7, 8, 9),
        (
            "course/aot/joint.py",
            "course/aot/fx_utils.py",
        ),
        key_cells=(
            "1. The compiler makes the same choice",
            "The activation memory budget",
            "2. Hooks meet compiled code",
            "3. Inside the min-cut partitioner",
            "One policy, eager and compiled",
            "4. Reading real compile artifacts",
        ),
    ),
    Lesson(
        11,
        "11_offload_pass",
        "Offloading as a graph pass",
        (72, 122),  # a timed walk-through, calibrated on the old lesson 09 (NOTE above)
        (
            "choose what an offloading pass moves and apply torch's pass to a partitioned graph",
            "write an offload pass that inserts the copies and rewires the backward, checked against torch's",
            "predict where torch's offload pass starts its copies and puts its waits, with and without sink_wait",
        ),
        (4, 7, 10),
        (
            "course/aot/fx_utils.py",
            "course/content/lesson10.py",
        ),
        key_cells=(
            "1. Offload as a graph pass",
            "A policy that asks for offload",
            "2. Recompute, offload or keep",
            "Where the offload pass puts its waits",
        ),
    ),
)


def get(number: int) -> Lesson:
    """The lesson numbered ``number``. Raises KeyError naming the lessons that exist."""
    for lesson in LESSONS:
        if lesson.number == number:
            return lesson
    raise KeyError(f"no lesson {number}; lessons are {[lesson.number for lesson in LESSONS]}")


def notebook_folders() -> list[Path]:
    """Where this install keeps the learner notebooks, best first: the one code path by which
    ``course start`` / ``update`` find the lessons, in a wheel and in a checkout alike.

    A wheel carries them as the data package ``course.lessons_data`` (pyproject maps it to
    ``notebooks/`` at build time, so the checkout's ``notebooks/`` stays the only source);
    an editable install of a checkout finds ``notebooks/`` beside the package.

    Returns:
        Candidate folders; the caller takes the first that holds lesson notebooks.
    """
    try:
        spec = importlib.util.find_spec("course.lessons_data")
    except ImportError:  # pragma: no cover - only if `course` itself is broken
        spec = None
    shipped = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    package = Path(importlib.util.find_spec("course").origin).parent
    return shipped + [package.parent / "notebooks"]


def lesson_set() -> str:
    """The lessons this version of the course teaches, as one line for ``course --version``.

    >>> lesson_set() == f"{len(LESSONS)} lessons: " + ", ".join(lesson.slug for lesson in LESSONS)
    True
    >>> lesson_set().split(": ", 1)[1].startswith("00_warmup, 01_autograd_graph")
    True
    """
    return f"{len(LESSONS)} lessons: " + ", ".join(lesson.slug for lesson in LESSONS)


def check_files(number: int) -> list[Path]:
    """The files that hold lesson ``number``'s checks, found without importing them: every
    module of the package ``course/checks/lessonNN/`` (one per exercise, ``exN_M_name.py``,
    and what they share), or the one module ``course/checks/lessonNN.py`` of a lesson not yet
    split. ``[]`` for a lesson without checks.

    >>> [p.name for p in check_files(0)]
    ['__init__.py', 'ex0_1_cube_sum_grad.py', 'ex0_2_predicted_a_grad.py']
    >>> check_files(99)
    []
    """
    spec = importlib.util.find_spec("course.checks")
    folder = Path(list(spec.submodule_search_locations)[0])
    module, package = folder / f"lesson{number:02d}.py", folder / f"lesson{number:02d}"
    if (package / "__init__.py").is_file():
        return sorted(package.glob("*.py"))
    return [module] if module.is_file() else []


def registrations_in(path: Path) -> list[tuple[str | None, str | None]]:
    """``(id, name)`` of each ``exercise(...)`` / ``predict(...)`` call in the module at
    ``path``, read without importing it (``None`` where the call does not write it as a
    literal).

    >>> registrations_in(check_files(0)[1])
    [('0.1', 'cube_sum_grad')]
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        func = getattr(node, "func", None)
        called = getattr(func, "id", getattr(func, "attr", None))
        if not isinstance(node, ast.Call) or called not in ("exercise", "predict"):
            continue
        given = dict(zip(("id", "name"), node.args)) | {k.arg: k.value for k in node.keywords if k.arg}
        values = [getattr(given.get(key), "value", None) for key in ("id", "name")]
        found.append(tuple(v if isinstance(v, str) else None for v in values))
    return found


def registered_exercises(number: int) -> list[tuple[str, str]]:
    """``[(id, name), ...]`` of lesson ``number``'s exercises, in id order: the one answer to
    "which exercises does this lesson have", for every command.

    Read from the lesson's check files (:func:`check_files`) *without importing them* (no
    torch, no checks run), which is enough when every registration writes its ``id`` and
    ``name`` as literals; when one does not, the checks are imported and asked. ``[]`` for a
    lesson without checks.

    >>> registered_exercises(0)[:2]
    [('0.1', 'cube_sum_grad'), ('0.2', 'predicted_a_grad')]
    """
    found = [reg for path in check_files(number) for reg in registrations_in(path)]
    if not all(i is not None and n is not None for i, n in found):  # not literals: ask the checks
        from course import checks

        checks.load_all()
        return [(ex.id, ex.name) for ex in checks.all_exercises(number)]
    return sorted(found, key=lambda e: tuple(int(p) for p in e[0].split(".")))


def exercise_module(exercise_id: str, name: str) -> str:
    """The name of the module that registers exercise ``"N.M"`` whose answer is ``name``:
    ``exN_M_`` and the answer's name in snake case, so the file list reads as the lesson's
    exercises in order.

    >>> exercise_module("5.2", "CloneBeforeMul"), exercise_module("4.1", "SaveOnCPU")
    ('ex5_2_clone_before_mul', 'ex4_1_save_on_cpu')
    >>> exercise_module("0.1", "cube_sum_grad")
    'ex0_1_cube_sum_grad'
    """
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return f"ex{exercise_id.replace('.', '_')}_{words}"


def exercise_file(exercise_id: str) -> str:
    """Where exercise ``"N.M"`` is registered, as a path from the repository's root, read
    without importing: ``course/checks/lessonNN/exN_M_name.py``, or ``course/checks/lessonNN.py``
    for a lesson whose checks are one module (and for a lesson without checks, where its one
    module would be).

    >>> exercise_file("0.2")
    'course/checks/lesson00/ex0_2_predicted_a_grad.py'
    >>> exercise_file("97.1")
    'course/checks/lesson97.py'
    """
    number = int(exercise_id.split(".")[0])
    for path in check_files(number):
        if any(i == exercise_id for i, _ in registrations_in(path)):
            return "course/checks/" + path.as_posix().rsplit("/checks/", 1)[1]
    return f"course/checks/lesson{number:02d}.py"
