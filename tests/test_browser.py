"""The notebook widgets in a real browser: Voilà serves a notebook, headless Chromium
clicks Approve in an ApprovalPanel and picks a row in a TraceView.

Needs Debian's ``chromium`` at /usr/bin/chromium and the Python packages ``playwright``
(its wheel bundles its driver; no browser download) and ``voila``. In CI (``CI=true``)
a missing piece fails the test; elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _needs import require

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "tests" / "notebooks" / "approval_and_trace.ipynb"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("CTXNB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SERVER_START_S = 90
RENDER_S = 120
DECISION_S = 30


def _missing() -> str | None:
    if not Path(CHROMIUM).is_file() and shutil.which("chromium") is None:
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    for module, hint in (("playwright", "pip install playwright"), ("voila", "pip install voila")):
        try:
            __import__(module)
        except ImportError:
            return f"Python package {module!r} is missing ({hint})"
    return None


def _require_browser() -> None:
    reason = _missing()
    if reason is None:
        return
    require(False, f"the browser test's tools ({reason})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _complete_json(path: Path) -> bool:
    """True once ``path`` holds a whole JSON document (the kernel may still be writing)."""
    try:
        json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return False
    return True


def _wait_until(pred: Any, timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def _voila(notebook: Path, out: Path, log: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "CTXNB_BROWSER_OUT": str(out), "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "voila",
        str(notebook),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
    ]
    with open(log, "wb") as fh:
        # Its own process group, so the kernel it starts dies with it.
        proc = subprocess.Popen(
            cmd, cwd=out, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/"
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"voila exited with {proc.returncode}: {log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    return True
            except OSError:
                return False

        _wait_until(up, SERVER_START_S, "the Voilà server to start")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_approve_and_pick_a_trace_row_in_chromium(tmp_path: Path) -> None:
    _require_browser()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    out = tmp_path / "out"
    out.mkdir()
    nb = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, nb)
    external: list[tuple[str, str]] = []

    with _voila(nb, out, tmp_path / "voila.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1600})

            def route(r: Any) -> None:
                # Everything the page needs is served by Voilà from installed wheels.
                if r.request.url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:")):
                    r.continue_()
                else:
                    # Blocked, so nothing is fetched from outside; kept to check below.
                    external.append((r.request.resource_type, r.request.url))
                    r.abort()

            page.route("**/*", route)
            page.goto(url, timeout=RENDER_S * 1000, wait_until="domcontentloaded")
            approve = page.locator(".ctxnb-approve")
            approve.wait_for(state="visible", timeout=RENDER_S * 1000)
            page.locator(".ctxnb-trace-rows select").wait_for(
                state="visible", timeout=RENDER_S * 1000
            )
            shown = page.locator(".ctxnb-approval-requests").inner_text().replace("\xa0", " ")
            assert "rm -rf build" in shown
            page.screenshot(path=str(ARTIFACTS / "browser-approval-pending.png"), full_page=True)

            approve.click()
            decision_file = out / "decision.json"
            _wait_until(
                lambda: _complete_json(decision_file),
                DECISION_S,
                "the decision to reach the kernel",
            )
            decision = json.loads(decision_file.read_text())
            assert decision["approved"] is True and decision["by"] == "browser-user"
            status = page.locator(".ctxnb-approval-status")
            _wait_until(
                lambda: "approved by browser-user" in status.inner_text(),
                DECISION_S,
                "the panel to show the decision",
            )
            page.screenshot(path=str(ARTIFACTS / "browser-approval-decided.png"), full_page=True)

            expected = json.loads((out / "expected.json").read_text())
            page.locator(".ctxnb-trace-rows select").select_option(index=2)
            detail = page.locator(".ctxnb-trace-detail")
            _wait_until(
                lambda: expected["row2"] in detail.inner_text(),
                DECISION_S,
                "the TraceView detail of the selected row",
            )
            assert expected["file2"] in detail.inner_text()
            page.screenshot(path=str(ARTIFACTS / "browser-trace-detail.png"), full_page=True)
        finally:
            browser.close()
    # Voilà's page template links a Font Awesome stylesheet from a CDN; it was blocked
    # above and the widgets worked without it. No script or data may come from outside:
    # the widget code ships in the installed wheels.
    assert [u for kind, u in external if kind != "stylesheet"] == [], external
