"""What a verdict may say about the instructor's extra cases: passed or failed, nothing more.

An extra case (``--extra-cases``, :mod:`course.checks.extra`) is the instructor's secret. The
judge names the first case an answer gets wrong with its inputs, the answer's value and the
expected one (what ``check()`` prints in the notebook); for an extra case that would hand the
case to the learner through the feedback file and the report (an answer that returns its
input shows the input as ``yours``). So when the first case failed is an extra one, the
message keeps its first line and the hint, and names no case::

    [3.3 storage_bytes] failed: 7/8 cases
      case:     one of your instructor's extra cases (not shown)
      hint:     ...
"""

from __future__ import annotations

import dataclasses

__all__ = ["EXTRA_CASE", "hide_extra_case"]

EXTRA_CASE = "  case:     one of your instructor's extra cases (not shown)"


def hide_extra_case(ex, extra: int, result, yours: list, expected: list, cost: dict, revealed: bool):
    """``result`` (the judge's verdict on ``ex``, whose last ``extra`` hidden cases are the
    instructor's), its message cut to passed/failed when the first case failed is an extra one."""
    from course import checks

    shipped = len(ex.all_cases) - extra
    if not extra or result.status == "passed" or result.cases_passed == result.cases_total:
        return result
    alone = dataclasses.replace(ex, hidden=ex.hidden[: len(ex.hidden) - extra])
    judged = checks.judge(alone, yours[:shipped], expected[:shipped], cost, revealed)
    if judged.cases_passed < judged.cases_total:  # a shipped case fails first: the message shows it
        return result
    head = result.message.splitlines()[0]
    lines = [head, EXTRA_CASE] + ([f"  hint:     {result.hint}"] if result.hint else [])
    return dataclasses.replace(result, message="\n".join(lines))
