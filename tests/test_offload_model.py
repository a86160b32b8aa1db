"""The timing model (course.offload.model), asked as questions.

Does every schedule lie between its bounds? Is a stricter schedule (fewer copies in flight)
never faster than a looser one? Is ``in_flight=0`` exactly the synchronous sum? Do the
hand-computed examples come out? Every property holds on any seed: inputs are finite,
non-negative floats, and comparisons allow for rounding.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.offload.model import (
    MB,
    StepPrediction,
    lower_bound,
    overlapped_time,
    pipelined_time,
    predict_step,
    step_schedule,
    synchronous_time,
    transfer_times,
)

EPS = 1e-9
seconds = st.floats(0, 1e3, allow_nan=False, allow_infinity=False)


def _le(a, b):
    return a <= b + EPS * max(1.0, abs(a), abs(b))


@st.composite
def layers(draw):
    n = draw(st.integers(1, 9))
    row = st.lists(seconds, min_size=n, max_size=n)
    nbytes = st.lists(st.one_of(st.just(0.0), st.floats(1, 1e9)), min_size=n, max_size=n)
    return draw(row), draw(row), draw(nbytes), draw(st.floats(1e3, 1e12))


@settings(max_examples=60, deadline=None)
@given(compute=st.lists(seconds, min_size=1, max_size=10), data=st.data())
def test_does_every_one_pass_schedule_lie_between_its_bounds_and_tighten_with_fewer_in_flight(compute, data):
    transfer = data.draw(st.lists(seconds, min_size=len(compute), max_size=len(compute)))
    lo, hi = lower_bound(compute, transfer), synchronous_time(compute, transfer)
    times = [overlapped_time(compute, transfer, k) for k in (0, 1, 2, 5, None)]
    for t in times:
        assert _le(lo, t) and _le(t, hi)
    assert math.isclose(times[0], hi, rel_tol=1e-9, abs_tol=1e-9)  # 0 in flight: synchronous
    for stricter, looser in zip(times, times[1:]):
        assert _le(looser, stricter)
    assert math.isclose(times[-1], pipelined_time(compute, transfer), rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(layers(), st.booleans(), st.floats(0, 1e-2))
def test_does_every_step_schedule_lie_between_its_bounds_and_tighten_with_fewer_in_flight(
    ls, keep_last, hook
):
    fwd, bwd, saved, bw = ls
    p = predict_step(fwd, bwd, saved, bw, hook_s=hook, keep_last=keep_last)
    ends = [
        step_schedule(fwd, bwd, saved, bw, k, hook_s=hook, keep_last=keep_last).end
        for k in (0, 1, 2, 4, None)
    ]
    for t in ends:
        assert _le(p.lower, t) and _le(t, p.synchronous)
    for stricter, looser in zip(ends, ends[1:]):  # fewer copies in flight is never faster
        assert _le(looser, stricter)
    assert _le(p.lower, p.pipelined) and _le(p.pipelined, p.overlapped) and _le(p.overlapped, p.synchronous)
    assert _le(p.none, p.lower)
    # in_flight=0 is the sum of everything: compute, hooks and each moved layer's two copies
    x = transfer_times(saved, bw)
    moved = sum(t for i, t in enumerate(x) if not (keep_last and i == len(x) - 1))
    assert math.isclose(p.synchronous, p.none + 2 * len(fwd) * hook + 2 * moved, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(layers(), st.sampled_from([0, 1, 2, None]))
def test_does_the_schedule_keep_streams_in_order_and_memory_balanced(ls, k):
    fwd, bwd, saved, bw = ls
    s = step_schedule(fwd, bwd, saved, bw, k)
    for stream in ("compute", "copy"):  # one stream does one thing at a time
        ivs = [iv for iv in s.intervals if iv[0] == stream]
        for a, b in zip(ivs, ivs[1:]):
            assert _le(a[2], b[1])
    assert abs(s.memory[-1][1]) <= 1e-6 * max(1.0, sum(saved))  # every activation freed
    assert _le(s.peak, sum(saved))  # never more than keeping everything


def test_hand_computed_examples():
    assert transfer_times([32e6, 0.0], bandwidth=16e9, latency=1e-5) == [2e-3 + 1e-5, 0.0]
    # compute 1 | 2 | 3; one copy in flight: layer 2 waits for copy 0 (ends at 3), copies end 3, 5, 8
    assert overlapped_time([1.0, 2.0, 3.0], [2.0, 2.0, 2.0], in_flight=1) == 8.0
    assert overlapped_time([1.0, 2.0, 3.0], [2.0, 2.0, 2.0], in_flight=0) == 12.0
    assert pipelined_time([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 8.0
    p = predict_step([1.0, 1.0], [2.0, 2.0], [3.0, 1.0], bandwidth=1.0)
    # layer 0 goes out [1, 4) and back [4, 7) (the link is busy until 4); layer 1 stays on the
    # device and its backward runs [2, 4); layer 0's backward waits for its fetch: [7, 9)
    assert p == StepPrediction(none=6.0, lower=6.0, pipelined=9.0, overlapped=9.0, synchronous=12.0)
    assert MB == 2**20
    with pytest.raises(ValueError):
        overlapped_time([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        transfer_times([1.0], bandwidth=0)
    with pytest.raises(ValueError):
        step_schedule([1.0], [1.0], [1.0], 1.0, in_flight=-1)


def test_keeping_the_last_layer_means_backward_starts_without_waiting():
    s = step_schedule([1.0] * 3, [2.0] * 3, [2.0] * 3, bandwidth=1.0)
    labels = [iv[3] for iv in s.intervals]
    assert "d2h2" not in labels and "h2d2" not in labels
    fwd_end = max(iv[2] for iv in s.intervals if iv[3].startswith("fwd"))
    bwd2 = next(iv for iv in s.intervals if iv[3] == "bwd2")
    assert bwd2[1] == fwd_end  # the last layer's backward starts as soon as forward ends
