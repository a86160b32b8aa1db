"""Does the teaching trace name tensors stably, record only when asked, and cost nothing when off?"""

import torch

from course import trace


def test_nothing_is_recorded_outside_a_block():
    assert trace.ACTIVE is False
    trace.emit("pack", tensor=torch.ones(1))  # a no-op, not an error
    assert trace.tensor_name(torch.ones(1)) is None


def test_names_follow_first_sight_and_repeat_for_the_same_tensor():
    a, b = torch.ones(2), torch.zeros(3)
    with trace.record() as rec:
        trace.emit("pack", "X", tensor=a)
        trace.emit("pack", "X", tensor=b)
        trace.emit("unpack", "X", tensor=a, saved="t0")
    assert rec.lines() == ["pack X t0 (2,)", "pack X t1 (3,)", "unpack X t0 (2,) saved=t0"]
    assert trace.ACTIVE is False


def test_a_freed_tensor_whose_id_is_reused_never_lends_its_name_to_two_live_tensors():
    with trace.record() as rec:
        names = []
        for n in range(50):  # ids of freed tensors get reused by new ones
            t = torch.ones(n + 1)
            names.append(rec.name_of(t))
            del t
        live = [torch.ones(k + 1) for k in range(5)]
        live_names = [rec.name_of(t) for t in live]
    assert len(set(names)) == 50
    assert len(set(live_names)) == 5 and not set(live_names) & set(names)


def test_nested_recordings_both_see_events_and_the_flag_resets():
    with trace.record() as outer:
        with trace.record() as inner:
            trace.emit("hook", "h")
        trace.emit("hook", "g")
    assert inner.lines() == ["hook h"] and outer.lines() == ["hook h", "hook g"]
    assert trace.ACTIVE is False
