"""Does every lesson have instructor notes, with the hand-written parts and a generated list
of the wrong answers its checks recognise (every exercise, every hint, from the registry)?"""

from __future__ import annotations

from pathlib import Path

import pytest

from course.checks import all_exercises, load_all
from course.house.sources import notes_offences
from course.lessons import LESSONS

NOTES = Path(__file__).resolve().parents[1] / "docs" / "instructor-notes"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_the_notes_have_every_part_and_every_known_wrong_answer(lesson):
    path = Path("docs", "instructor-notes", f"{lesson.slug}.md")
    offences = notes_offences(path, NOTES.parents[1])
    assert offences == [], "\n".join(offences)
    text = (NOTES / f"{lesson.slug}.md").read_text()
    assert text.startswith(f"# Lesson {lesson.number:02d}") and f"`course slides {lesson.number:02d}`" in text
    generated = text.split("<!-- wrong-answers -->", 1)[1].split("<!-- /wrong-answers -->", 1)[0]
    load_all()
    for ex in all_exercises(lesson.number):
        assert f"- **{ex.id}** `{ex.name}`" in generated
        for w in ex.wrong:
            assert " ".join(w.hint.split())[:60].replace("|", "\\|") in generated, (ex.id, w.hint[:60])
    assert f"({lesson.slug}.md)" in (NOTES / "README.md").read_text()  # the index links it
