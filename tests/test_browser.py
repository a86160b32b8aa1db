"""Does a Stepper render and respond in real JupyterLab, in headless Chromium?

We start JupyterLab on a free loopback port (token auth, no browser) over a temporary root
holding a copy of tests/data/browser_stepper.ipynb, open it with Playwright, run all cells,
check the widget's slider is there and that clicking "next" changes the description, and
save screenshots to artifacts/: the page (browser_stepper.png), the backward stepper's
drawing (browser_backward_stepper.png) and the joint-graph drawing (browser_joint_graph.png).

Skipped only when /usr/bin/chromium is missing and COURSE_REQUIRE_BROWSER is not "1"
(CI sets it, so there a missing browser fails).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "tests" / "data" / "browser_stepper.ipynb"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.browser


def _need_browser() -> None:
    if not os.path.exists(CHROMIUM) and os.environ.get("COURSE_REQUIRE_BROWSER") != "1":
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium); "
                    "set COURSE_REQUIRE_BROWSER=1 to make this a failure")
    assert os.path.exists(CHROMIUM), f"COURSE_REQUIRE_BROWSER=1 but {CHROMIUM} is missing"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, proc: subprocess.Popen, log: Path, timeout: float = 40) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"jupyter lab did not answer within {timeout}s:\n{log.read_text()[-3000:]}")


def _accept_kernel_dialog(page, until, timeout: float = 40) -> None:
    """Wait for ``until``; if JupyterLab asks which kernel to use meanwhile, pick the default."""
    end = time.monotonic() + timeout
    select = page.locator(".jp-Dialog button", has_text="Select")
    while time.monotonic() < end:
        if until.is_visible():
            return
        if select.count() and select.first.is_visible():
            select.first.click()
        page.wait_for_timeout(250)
    until.wait_for(timeout=1_000)  # raises with Playwright's own message


@pytest.mark.slow
def test_stepper_renders_and_next_changes_description(tmp_path):
    _need_browser()
    from playwright.sync_api import expect, sync_playwright

    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp_path / "jupyter.log"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
           "--ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--ServerApp.port_retries=0"] + (["--allow-root"] if os.geteuid() == 0 else [])
    # No "get notified about Jupyter news?" toast over the screenshot.
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    cmd.append(f"--LabApp.user_settings_dir={tmp_path / 'settings'}")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_server(f"{base}/api/status?token={token}", proc, log)
        with sync_playwright() as p:
            browser = p.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, args=ARGS,
                headless=True, viewport={"width": 1280, "height": 900})
            page = browser.new_page()
            try:
                shots = ROOT / "artifacts"
                shots.mkdir(exist_ok=True)
                page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
                # The kernel must be connected (not "No Kernel | Initializing") before Run All.
                expect(page.locator(".jp-StatusBar-Widget").first).to_contain_text(
                    "Python 3 (ipykernel) | Idle", timeout=30_000)
                page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
                page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
                slider = page.locator(".jupyter-widgets .widget-slider").first
                _accept_kernel_dialog(page, until=slider)
                description = page.locator(".course-stepper-description .widget-html-content").first
                expect(description).to_contain_text("before backward", timeout=10_000)
                before = description.inner_text()
                page.locator(".course-stepper button", has_text="next").first.click()
                expect(description).to_contain_text("step 1/", timeout=20_000)
                after = description.inner_text()
                # The printed frame 1 sits under the widget: the same state in plain text.
                expect(page.locator(".jp-OutputArea-output pre").last).to_contain_text("pre-hook")
                page.screenshot(path=str(shots / "browser_stepper.png"), full_page=True)
                # The drawings on their own, as a learner sees them in JupyterLab (a tall
                # window, so a drawing is not clipped under the toolbars).
                page.set_viewport_size({"width": 1280, "height": 1800})
                stepper = page.locator(".course-stepper").first
                expect(stepper.locator("img")).to_be_visible(timeout=10_000)
                stepper.scroll_into_view_if_needed()
                stepper.screenshot(path=str(shots / "browser_backward_stepper.png"))
                joint_png = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output img").first
                joint_png.scroll_into_view_if_needed()
                joint_png.screenshot(path=str(shots / "browser_joint_graph.png"))
                box = joint_png.bounding_box()
                assert box and box["width"] > 400 and box["height"] > 400, box
            except Exception:
                page.screenshot(path=str(shots / "browser_stepper_failure.png"), full_page=True)
                raise
            finally:
                browser.close()
        assert "before backward" in before
        assert after.startswith("step 1/") and "pre-hook" in after, after
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_is_a_missing_browser_a_skip_only_when_not_required(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("COURSE_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        _need_browser()
    monkeypatch.setenv("COURSE_REQUIRE_BROWSER", "1")
    with pytest.raises(AssertionError, match="COURSE_REQUIRE_BROWSER=1"):
        _need_browser()
