"""Do the steppers show what really happened, and does the widget respond to its controls?

The frame functions are pure and tested against torch: the backward order is the order
torch fires node hooks (registered here independently), the saved-tensor counts are the
number of times torch calls pack / unpack hooks. The widget is driven like a user would:
set the slider, click next / previous, and read the description and the Output area.
"""

from __future__ import annotations

import html
import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from course import trace  # noqa: E402
from course.show.frames import (  # noqa: E402
    Frame,
    backward_order_frames,
    event_frames,
    mutation_frames,
    offload_frames,
    saved_tensor_frames,
    stage_diff,
    stage_diff_html,
    stage_frames,
)
from course.show.widgets import (  # noqa: E402
    Stepper,
    backward_order_stepper,
    joint_stages_stepper,
    mutation_stepper,
    offload_stepper,
    saved_tensors_stepper,
)
from course.trace import Event  # noqa: E402


def _shown(stepper: Stepper) -> str:
    return "".join(o.get("text", "") for o in stepper.output.outputs)


def _html(stepper: Stepper) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in stepper.output.outputs)


# ---- the generic Stepper ---------------------------------------------------------------


def test_do_slider_and_buttons_move_through_frames():
    frames = [Frame(f"frame {k}", f"text {k}", f"about {k}") for k in range(4)]
    s = Stepper(frames, title="demo")
    assert s.index == 0 and "frame 0" in s.description.value and _shown(s) == "text 0\n"
    s.slider.value = 2
    assert "frame 2" in s.description.value and "about 2" in s.description.value
    assert _shown(s) == "text 2\n"
    s.next_button.click()
    s.next_button.click()  # clamps at the last frame
    assert s.index == 3 and _shown(s) == "text 3\n"
    for _ in range(5):
        s.prev_button.click()
    assert s.index == 0 and _shown(s) == "text 0\n"
    s.play.value = 1  # Play drives the slider (a kernel-side link)
    assert s.slider.value == 1 and _shown(s) == "text 1\n"
    # The text/plain twin a saved notebook stores: no model ids, no addresses.
    assert s._repr_mimebundle_()["text/plain"] == "Stepper(4 frames, showing 1: 'frame 1')"


def test_does_draw_replace_the_text_with_a_picture():
    import matplotlib.pyplot as plt

    def draw(frame):
        fig, ax = plt.subplots()
        ax.set_title(frame.title)
        return fig

    before = set(plt.get_fignums())  # other tests may leave figures open
    s = Stepper([Frame("a"), Frame("b")], draw=draw)
    s.next_button.click()
    (out,) = s.output.outputs
    assert out["output_type"] == "display_data" and "image/png" in out["data"]
    assert set(plt.get_fignums()) == before  # the stepper's figures are closed once shown
    s2 = Stepper([Frame("a")], draw=lambda f: f"drawn {f.title}")
    assert _shown(s2) == "drawn a\n"


def test_is_html_in_titles_escaped():
    s = Stepper([Frame("<b>x</b> & y", "t")])
    assert "&lt;b&gt;x&lt;/b&gt; &amp; y" in s.description.value


def test_do_empty_inputs_fail_clearly():
    with pytest.raises(ValueError, match="at least one frame"):
        Stepper([])
    with pytest.raises(ValueError, match="nothing to step through"):
        event_frames([])
    with pytest.raises(ValueError, match="no stages"):
        stage_frames([])
    with pytest.raises(ValueError, match="no intervals"):
        offload_frames([])
    with pytest.raises(ValueError, match="has no grad_fn.*requires_grad=True"):
        backward_order_frames(torch.ones(2))


# ---- backward order --------------------------------------------------------------------

OPS = [torch.sin, torch.exp, lambda t: t * 3, lambda t: t.cumsum(0), torch.tanh]


def _program(ops):
    """Two leaves feeding a branching program; the same seed gives the same graph."""
    torch.manual_seed(0)
    w = torch.randn(4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    h, branches = w * b, []
    for k in ops:
        h = OPS[k % len(OPS)](h)
        if k % 3 == 0:
            branches.append(h * b)
    return sum(branches, h).sum(), w, b


def _torch_hook_order(ops):
    """The oracle: hooks registered straight on torch's nodes, recorded in firing order."""
    loss, w, b = _program(ops)
    seen, stack, fired = [], [loss.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.append(n)
        n.register_prehook(lambda go, n=n: fired.append(("pre-hook", n.name())))
        n.register_hook(lambda gi, go, n=n: fired.append(("hook", n.name())))
        stack += [m for m, _ in n.next_functions]
    loss.backward()
    return [(e, name.replace("torch::autograd::", "")) for e, name in fired], w.grad, b.grad


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=6))
def test_is_the_backward_order_the_order_torch_fires_hooks(ops):
    want, w_grad, b_grad = _torch_hook_order(ops)
    loss, w, b = _program(ops)
    frames = backward_order_frames(loss, names={"w": w, "b": b})
    got = [(f.data["event"], f.data["graph"].nodes[f.data["node"]]["name"]) for f in frames[1:]]
    assert got == want
    torch.testing.assert_close((w.grad, b.grad), (w_grad, b_grad), equal_nan=True)  # it ran
    g = frames[0].data["graph"]
    for f in frames[1:]:  # a node runs only after every node that sends it gradients
        node = f.data["node"]
        assert {p for p in g.predecessors(node)} <= set(f.data["ran"]) | {node}
    assert len(frames[-1].data["ran"]) == g.number_of_nodes()


def test_do_backward_frames_print_the_current_node():
    w = torch.ones(2, requires_grad=True)
    frames = backward_order_frames((w * 2).sin().sum(), names={"w": w})
    assert frames[0].title == "before backward"
    assert frames[1].title == "step 1/8: pre-hook n0 SumBackward0"
    assert "n0 SumBackward0 * ->" in frames[1].text
    assert frames[-1].title == "step 8/8: hook n3 AccumulateGrad(w)"
    assert frames[-1].text.endswith("ran so far: n0, n1, n2, n3")
    assert all("0x" not in str(f) for f in frames)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=6))
def test_does_the_node_that_runs_next_have_the_highest_sequence_number_of_the_ready(ops):
    # The claim the pre-hook descriptions make, checked against torch's firing order.
    loss, w, b = _program(ops)
    frames = backward_order_frames(loss, names={"w": w, "b": b})
    g = frames[0].data["graph"]
    seq = {n: g.nodes[n]["seq"] for n in g}
    started: set = set()
    for f in frames[1:]:
        if f.data["event"] != "pre-hook":
            continue
        ran = set(f.data["ran"])
        ready = [n for n in g if n not in started and set(g.predecessors(n)) <= ran]
        assert f.data["node"] in ready and seq[f.data["node"]] == max(seq[n] for n in ready)
        started.add(f.data["node"])


def test_does_each_backward_frame_say_what_is_new():
    w = torch.ones(2, requires_grad=True)
    frames = backward_order_frames((w * 2).sin().sum(), names={"w": w})
    descriptions = [f.description for f in frames]
    assert len(set(descriptions)) == len(descriptions)  # no boilerplate repeated
    for f in frames[1:]:
        d = f.data["graph"].nodes[f.data["node"]]
        assert f.description.startswith(f"{f.data['node']} {d['label']}")
    leaf_hook = frames[-1]
    assert leaf_hook.data["event"] == "hook" and "AccumulateGrad" in leaf_hook.title
    assert "w.grad" in leaf_hook.description and "sent" not in leaf_hook.description
    assert "next_functions" not in " ".join(descriptions)
    (mul_hook,) = [
        f for f in frames if f.title.endswith("hook n2 MulBackward0") and f.data["event"] == "hook"
    ]
    assert mul_hook.description.endswith("sent them to n3:0.")


def test_does_the_backward_drawing_shade_what_ran_and_tell_pre_hook_from_hook():
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    from course.show.boxes import drawn_graph_report
    from course.show.graph import AUTOGRAD_COLORS
    from course.show.widgets import EVENT_COLORS, draw_backward_frame

    w = torch.ones(2, requires_grad=True)
    frames = backward_order_frames((w * 2).sin().sum(), names={"w": w})
    for f in frames[1:]:
        fig = draw_backward_frame(f)
        fills = {
            p.get_gid()[5:]: mcolors.to_hex(p.get_facecolor())
            for p in fig.axes[0].patches
            if (p.get_gid() or "").startswith("node:")
        }
        assert fills[f.data["node"]] == EVENT_COLORS[f.data["event"]]
        for n in f.data["ran"]:
            if n != f.data["node"]:
                assert fills[n] == AUTOGRAD_COLORS["ran"]
        assert drawn_graph_report(fig)["overflow"] == []
        plt.close(fig)
    assert EVENT_COLORS["pre-hook"] != EVENT_COLORS["hook"]


def test_does_inputs_limit_which_leaves_accumulate():
    w = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    frames = backward_order_frames((w * b).sum(), names={"w": w, "b": b}, inputs=[w])
    ran = [f.data["graph"].nodes[f.data["node"]]["label"] for f in frames[1:] if f.data["event"] == "hook"]
    assert "AccumulateGrad(w)" in ran and "AccumulateGrad(b)" not in ran
    assert b.grad is None and w.grad is not None


def test_does_the_backward_stepper_step_and_draw():
    w = torch.ones(2, requires_grad=True)
    s = backward_order_stepper((w * 2).sum(), names={"w": w})
    assert "before backward" in s.description.value
    s.next_button.click()
    assert "pre-hook n0 SumBackward0" in s.description.value and "SumBackward0 *" in _shown(s)
    w2 = torch.ones(2, requires_grad=True)
    frames = backward_order_frames((w2 * 2).sum(), names={"w": w2})
    d = backward_order_stepper(frames, drawing=True)
    d.slider.value = 3
    assert d.output.outputs[0]["output_type"] == "display_data"


# ---- saved tensors and mutation events -------------------------------------------------


def test_do_event_frames_count_per_tensor():
    evs = [
        Event("pack", "MulBackward0", "t0", (2,)),
        Event("pack", "MulBackward0", "t1", (3,)),
        Event("hook", "h"),
        Event("unpack", "MulBackward0", "t2", (2,), (("saved", "t0"),)),
    ]
    frames = event_frames(evs)
    assert [f.title.split(":")[0] for f in frames] == [f"event {k}/4" for k in range(5)]
    last = frames[-1].text.splitlines()
    assert last[3] == "> unpack MulBackward0 t2 (2,) saved=t0"
    assert last[-2].split() == ["t0", "(2,)", "1", "1", "0"]  # the unpack counts for t0
    assert last[-1].split() == ["t1", "(3,)", "1", "0", "0"]
    assert [f.data["index"] for f in saved_tensor_frames(evs)] == [0, 1, 2, 3]  # no "hook"


def test_do_saved_tensor_frames_count_what_torch_packs():
    sth = pytest.importorskip("course.autograd.saved_tensors")
    calls = {"pack": 0, "unpack": 0}

    def program(hooks):
        torch.manual_seed(0)
        a = torch.randn(3, requires_grad=True)
        with hooks:
            loss = (a * a).sin().exp().sum()
        loss.backward()

    def count(kind):
        def hook(t):
            calls[kind] += 1
            return t

        return hook

    program(torch.autograd.graph.saved_tensors_hooks(count("pack"), count("unpack")))
    with trace.record() as events:
        program(sth.saved_tensors_hooks(lambda t: t, lambda t: t))
    frames = saved_tensor_frames(events)
    kinds = [f.data["events"][f.data["index"] - 1].kind for f in frames[1:]]
    assert kinds.count("pack") == calls["pack"] and kinds.count("unpack") == calls["unpack"]
    table = frames[-1].text.splitlines()[-len({e.tensor for e in events if e.kind == "pack"}) :]
    assert sum(int(row.split()[-3]) for row in table) == calls["pack"]
    s = saved_tensors_stepper(events)
    s.slider.value = len(frames) - 1
    assert "unpack" in s.description.value and _shown(s).startswith("  pack")


def test_does_a_mutation_show_its_clone():
    mutation = pytest.importorskip("course.autograd.mutation")
    a = torch.ones(3, requires_grad=True)
    with trace.record() as events:
        with mutation.allow_mutation_on_saved_tensors():
            b = a.clone()
            c = b.sin()
            b.mul_(2)
            c.sum().backward()
    torch.testing.assert_close(a.grad, torch.ones(3).cos())  # backward saw the value before mul_
    frames = mutation_frames(events)
    kinds = [f.data["events"][f.data["index"] - 1].kind for f in frames[1:]]
    assert kinds == ["pack", "clone", "unpack"]
    assert "cloned first" in frames[2].description
    packed = frames[1].data["events"][0].tensor  # the clone is named after the saved tensor
    assert f'"clone of {packed}"' in frames[2].description
    assert f"unpack of {packed} gets that clone" in frames[2].description
    assert all("0x" not in str(f) for f in frames)
    s = mutation_stepper(frames)
    s.next_button.click()
    s.next_button.click()
    assert "clone" in s.description.value


# ---- joint-graph stages ----------------------------------------------------------------


class FakeStage:
    def __init__(self, name, text=None):
        self.name, self.explanation = name, f"why {name}"
        if text is not None:
            self.text = text

    def __str__(self):
        return f"str of {self.name}"


def test_do_stage_frames_follow_the_protocol():
    stages = [FakeStage("one", "text one"), FakeStage("two", lambda: "called two"), FakeStage("three")]
    frames = stage_frames(stages)
    assert [f.title for f in frames] == ["stage 1/3: one", "stage 2/3: two", "stage 3/3: three"]
    assert [f.text for f in frames] == ["text one", "called two", "str of three"]
    assert frames[1].description == "why two" and frames[0].data is None
    s = joint_stages_stepper(stages, drawing=True)  # no graph: the diff alone, as HTML
    assert _html(s) == stage_diff_html(None, frames[0]) and "first stage: everything is new" in _html(s)
    s.next_button.click()
    assert "why two" in s.description.value
    assert _html(s) == stage_diff_html(frames[0], frames[1]) and _shown(s) == ""
    assert ">- text one</del>" in _html(s) and ">+ called two</ins>" in _html(s)
    s.listing.value = True  # the full listing, one click away
    assert _shown(s) == "--- full listing ---\ncalled two\n"
    s.listing.value = False
    assert "full listing" not in _shown(s)


def test_does_the_html_diff_strike_removed_lines_and_highlight_added_ones():
    before = Frame("s1", "keep\nold <a> & b\ngone")
    after = Frame("s2", "keep\nnew x < y & z  PlainAOTInput(idx=0)\nalso new")
    text, out = stage_diff(before, after), stage_diff_html(before, after)
    removed = [x[2:] for x in text.splitlines() if x.startswith("- ")]
    added = [x[2:] for x in text.splitlines() if x.startswith("+ ")]
    assert removed == ["old <a> & b", "gone"] and len(added) == 2
    # one struck-through <del> per removed line, one highlighted <ins> per added line
    dels = re.findall(r'<del style="([^"]*)">- (.*?)</del>', out)
    inss = re.findall(r'<ins style="([^"]*)">\+ (.*?)</ins>', out)
    assert [html.unescape(re.sub("</?b>", "", t)) for _, t in dels] == removed
    assert [html.unescape(re.sub("</?b>", "", t)) for _, t in inss] == added
    assert all("line-through" in style for style, _ in dels)
    assert all("background" in style and "line-through" not in style for style, _ in inss)
    # text is escaped: no raw <a> tag, & written &amp;; the new descriptor is named in bold
    assert "<a>" not in out and "old &lt;a&gt; &amp; b" in out and "x &lt; y &amp; z" in out
    assert out.count("<b>PlainAOTInput(idx=0)</b>") == 2  # in the heading and in its line
    assert "keep" not in out  # unchanged lines are not shown
    assert "first stage: everything is new" in stage_diff_html(None, after)
    assert "(no change in the text)" in stage_diff_html(after, after)


def test_does_a_stage_frame_show_a_drawing_and_an_html_diff():
    joint = pytest.importorskip("course.aot.joint")
    torch.manual_seed(0)
    jd = joint.export_joint(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    frames = stage_frames(jd.stages)
    k = next(k for k, f in enumerate(frames) if k and f.data is not None)
    s = joint_stages_stepper(frames)  # text mode: the diff as HTML
    s.slider.value = k
    (out,) = s.output.outputs
    assert out["output_type"] == "display_data" and "text/html" in out["data"]
    assert out["data"]["text/html"] == stage_diff_html(frames[k - 1], frames[k])
    s = joint_stages_stepper(frames, drawing=True)  # a drawing and, below it, the diff
    s.slider.value = k
    kinds = [next(m for m in ("image/png", "text/html") if m in o.get("data", {})) for o in s.output.outputs]
    assert kinds == ["image/png", "text/html"]
    assert repr(s) == f"Stepper({len(frames)} frames, showing {k}: {frames[k].title!r})"


def test_does_the_stage_diff_name_new_descriptors_and_removed_lines():
    joint = pytest.importorskip("course.aot.joint")
    torch.manual_seed(0)
    jd = joint.export_joint(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    frames = stage_frames(jd.stages)
    for before, after in zip(frames, frames[1:]):
        diff = stage_diff(before, after).splitlines()
        added = [x[2:] for x in diff if x.startswith("+ ")]
        removed = [x[2:] for x in diff if x.startswith("- ")]
        # every added line is in the new text and not the old, every removed one the reverse
        old, new = before.text.splitlines(), after.text.splitlines()
        assert all(x in new for x in added) and all(x in old for x in removed)
        assert len(new) - len(old) == len(added) - len(removed)
        for line in diff:
            if line.startswith("new descriptors: "):
                for desc in line[len("new descriptors: ") :].split(", "):
                    assert desc in after.text and desc not in before.text


def test_does_the_real_joint_builder_step():
    joint = pytest.importorskip("course.aot.joint")
    torch.manual_seed(0)
    jd = joint.export_joint(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    frames = stage_frames(jd.stages)
    assert [f.title.split(": ")[1] for f in frames] == [s.name for s in jd.stages]
    for f, s in zip(frames, jd.stages):
        assert f.data is s.graph_module and f.description == s.explanation
        # the stage's own header and explanation are said once, by the title and description
        assert str(s).endswith(f.text) and s.explanation not in f.text and "==" not in f.text
    s = joint_stages_stepper(jd.stages, drawing=True)
    s.slider.value = len(frames) - 1
    assert s.output.outputs[0]["output_type"] == "display_data"


def test_does_a_stage_drawing_box_the_nodes_the_stage_added():
    import matplotlib.pyplot as plt

    from course.show.widgets import draw_stage_frame

    joint = pytest.importorskip("course.aot.joint")
    torch.manual_seed(0)
    jd = joint.export_joint(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
    frames = [f for f in stage_frames(jd.stages) if f.data is not None]
    seen_added = 0
    for previous, f in zip(frames, frames[1:]):
        names = lambda fr: {n.name for n in fr.data.graph.nodes}  # noqa: E731
        added, removed = names(f) - names(previous), names(previous) - names(f)
        fig = draw_stage_frame(f, previous)
        boxed = {
            t.get_text().split()[0]
            for t in fig.axes[0].texts
            if t.get_bbox_patch() is not None
            and t.get_text().split()
            and t.get_bbox_patch().get_facecolor()[:3] == pytest.approx((0.718, 0.894, 0.690), abs=0.01)
        }
        assert boxed == added
        seen_added += len(added)
        title = fig.axes[0].get_title()
        assert f"new nodes boxed green: {len(added)}" in title
        assert all(r in title for r in sorted(removed)[:8])
        plt.close(fig)
    assert seen_added > 0  # some stage did add nodes, so the boxes were really looked for


# ---- offload timeline ------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["compute", "copy"]), st.integers(0, 10), st.integers(1, 4)),
        min_size=1,
        max_size=6,
    )
)
def test_do_offload_frames_list_what_runs_at_each_moment(raw):
    ivs = [(s, a, a + d, f"{s}{k}") for k, (s, a, d) in enumerate(raw)]
    mem = [(0, 0), (5, 1000)]
    frames = offload_frames(ivs, memory=mem)
    times = sorted({p for _, a, b, _ in ivs for p in (a, b)})
    assert [f.data["time"] for f in frames] == times
    for f in frames:
        t = f.data["time"]
        running = [f"{s}: {lab}" for s, a, b, lab in ivs if a <= t < b]
        assert f.description == "running: " + ("; ".join(running) or "nothing")
        assert f.text.endswith(f"memory at t={t:g}: {1000 if t >= 5 else 0}")


def test_does_the_offload_stepper_move_its_cursor():
    ivs = [("compute", 0, 4, "fwd"), ("copy", 1, 3, "d2h"), ("compute", 4, 6, "bwd")]
    s = offload_stepper(ivs, drawing=False)
    first = _shown(s)
    s.next_button.click()
    assert s.description.value.startswith("<b>t=1") and _shown(s) != first
    assert "running: compute: fwd; copy: d2h" in s.description.value
    d = offload_stepper(ivs, memory=[(0, 0), (1, 10)])
    assert d.output.outputs[0]["output_type"] == "display_data"


# ---- fx_utils explorer (lesson 07) -----------------------------------------------------------


def test_does_the_fx_utils_explorer_ask_nine_questions_answered_like_torch():
    from corpus import torch_joint
    from torch._functorch._aot_autograd import fx_utils as torch_fx_utils

    from course.widgets import fx_utils_frames, fx_utils_stepper

    gm = torch_joint("batchnorm_train")  # parameters, buffers, a user input and output
    frames = fx_utils_frames(gm)
    assert [f.title.split(" ", 1)[1] for f in frames] == [
        "get_param_nodes",
        "get_named_param_nodes",
        "get_buffer_nodes",
        "get_named_buffer_nodes",
        "get_all_input_and_grad_nodes",
        "get_param_and_grad_nodes",
        "get_plain_input_and_grad_nodes",
        "get_all_output_and_tangent_nodes",
        "get_plain_output_and_tangent_nodes",
    ]
    params = torch_fx_utils.get_param_nodes(gm.graph)
    buffers = torch_fx_utils.get_buffer_nodes(gm.graph)
    assert params and buffers
    assert frames[0].data["names"] == {n.name for n in params}
    assert frames[2].data["names"] == {n.name for n in buffers}
    s = fx_utils_stepper(gm, drawing=False)
    assert s.description.value and "9" in s.frames[-1].title
