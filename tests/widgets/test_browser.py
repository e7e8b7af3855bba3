"""The notebooks in a real browser, as a user opens them.

- Voilà (with ctxnb's template, which links nothing outside the server) runs every
  tutorial in headless Chromium; the test fails when a plot image or a widget is
  missing, blank or broken, when a cell fails, or when code is not monospace. It steps
  the ReplayView of tutorial 05 with the keyboard.
- JupyterLab runs a tutorial from scratch (its stored outputs cleared) the same way.
- An ApprovalPanel is approved with a click and a TraceView row picked.
- Tutorial 02 runs in JupyterLab up to its approval panel, which shows the diff coloured,
  the risk and a countdown; its toggle draws the diff side by side and back; Approve or
  Reject is clicked, and every cell after it runs.

No request may leave 127.0.0.1: every other request is aborted and the test fails.
Screenshots are kept in ``test-artifacts/``.

Needs Debian's ``chromium`` at /usr/bin/chromium and the Python packages ``playwright``
(its wheel bundles its driver; no browser download), ``voila`` and ``jupyterlab``. In
CI (``CI=true``) a missing piece fails the test; elsewhere the test is skipped with the
reason.
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

import nbformat
import pytest
from _needs import require
from _notebooks import expected_outputs
from _paths import REPO

# Each test runs a notebook server, its kernels and Chromium, with deadlines for what
# they render: under `make test`'s workers they run one at a time (one xdist group), so
# two of them never share the two cores with each other.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

NOTEBOOK = REPO / "tests" / "notebooks" / "approval_and_trace.ipynb"
TUTORIALS = sorted((REPO / "notebooks").glob("*.ipynb"))
TEMPLATES = REPO / "ctxnb" / "data" / "jupyter"  # voila/templates/ctxnb
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
    for module, hint in (
        ("playwright", "pip install playwright"),
        ("voila", "pip install voila"),
        ("jupyterlab", "pip install jupyterlab"),
    ):
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


def _server(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, port: int) -> Any:
    """Start a server in its own process group (its kernels die with it)."""
    with open(log, "wb") as fh:
        return subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


@contextlib.contextmanager
def _serving(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, port: int) -> Iterator[str]:
    proc = _server(cmd, cwd, env, log, port)
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{cmd[2]} exited with {proc.returncode}: {log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    return True
            except OSError:
                return False

        _wait_until(up, SERVER_START_S, f"the {cmd[2]} server to start")
        yield f"http://127.0.0.1:{port}/"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextlib.contextmanager
def _voila(target: Path, out: Path, log: Path) -> Iterator[str]:
    """Voilà serving a notebook or a folder, with ctxnb's template (no CDN links)."""
    port = _free_port()
    env = {
        **os.environ,
        "CTXNB_BROWSER_OUT": str(out),
        "PYTHONUNBUFFERED": "1",
        "JUPYTER_PATH": str(TEMPLATES),
    }
    cmd = [
        sys.executable,
        "-m",
        "voila",
        str(target),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--template=ctxnb",
        "--VoilaExecutor.timeout=600",
        "--show_tracebacks=True",
    ]
    with _serving(cmd, target if target.is_dir() else out, env, log, port) as url:
        yield url


def _outside(url: str) -> bool:
    return not url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:", "about:"))


def _block_outside(page: Any, external: list[tuple[str, str]]) -> None:
    """Abort and record every request that would leave 127.0.0.1."""

    def route(r: Any) -> None:
        if _outside(r.request.url):
            external.append((r.request.resource_type, r.request.url))
            r.abort()
        else:
            r.continue_()

    page.route("**/*", route)


# Every <img> in an output: decoded, and more than a flat colour (sampled on a canvas).
_IMAGES_JS = """
() => Promise.all([...document.querySelectorAll('.jp-OutputArea-output img')].map(
  async (img) => {
    try { await img.decode(); } catch (e) {}
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    let colors = 0;
    if (c.width && c.height) {
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length && seen.size < 8; i += 4 * 37) {
        seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      }
      colors = seen.size;
    }
    const r = img.getBoundingClientRect();
    return {width: img.naturalWidth, shown: r.width * r.height, colors: colors,
            alt: img.alt || ''};
  }))
"""

# Every output that holds a widget view: its size and whether it shows anything.
_WIDGETS_JS = """
() => [...document.querySelectorAll('.jp-OutputArea-output')]
  .filter((o) => o.querySelector('.jupyter-widgets'))
  .map((o) => {
    const w = o.querySelector('.jupyter-widgets');
    const r = w.getBoundingClientRect();
    return {height: r.height, width: r.width, text: (w.innerText || '').trim().length,
            drawn: w.querySelectorAll('img, svg, select, button, input').length,
            error: /Error displaying widget|Model not found/.test(o.innerText || '')};
  })
"""

_CODE_STYLE_JS = """
() => [...document.querySelectorAll('pre.ctxnb-code, pre.ctxnb-diff')].map((p) => {
  const s = getComputedStyle(p);
  return {font: s.fontFamily, lineHeight: parseFloat(s.lineHeight), size: parseFloat(s.fontSize)};
})
"""


def _screenshot(page: Any, name: str) -> None:
    """The whole notebook: Voilà and JupyterLab scroll inside an element, not the page, so
    the viewport grows to the content's height first."""
    height = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('#rendered_cells, .jp-WindowedPanel-"
        "outer, body')].map((e) => e.scrollHeight))"
    )
    size = page.viewport_size or {"width": 1280, "height": 1000}
    page.set_viewport_size({"width": size["width"], "height": int(min(max(height, 600), 12000))})
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.set_viewport_size(size)


def _check_rendered(page: Any, name: str, plots: int, widgets: int) -> dict[str, Any]:
    """Wait until the notebook's plots and widgets are drawn, then check them."""

    def drawn() -> bool:
        text = page.locator("body").inner_text()
        for sign in ("Traceback", "There was an error when executing cell"):
            assert sign not in text, f"{name}: a cell failed:\n{text[-3000:]}"
        imgs = page.evaluate(_IMAGES_JS)
        views = page.evaluate(_WIDGETS_JS)
        return len([i for i in imgs if i["width"]]) >= plots and len(views) >= widgets

    try:
        _wait_until(drawn, RENDER_S, f"{plots} plots and {widgets} widgets in {name}", 1.0)
    except AssertionError as exc:
        text = page.locator("body").inner_text()
        raise AssertionError(f"{exc}\n--- the page ends with:\n{text[-2000:]}") from None
    finally:
        _screenshot(page, name)
    imgs = page.evaluate(_IMAGES_JS)
    views = page.evaluate(_WIDGETS_JS)
    blank = [i for i in imgs if i["width"] == 0 or i["colors"] < 3 or i["shown"] < 100]
    assert not blank, f"{name}: blank or undrawn images {blank}"
    empty = [v for v in views if v["error"] or v["height"] < 10 or not (v["text"] or v["drawn"])]
    assert not empty, f"{name}: empty or broken widget views {empty}"
    text = page.locator("body").inner_text()
    assert "Traceback" not in text, f"{name}: a cell failed:\n{text[-3000:]}"
    for style in page.evaluate(_CODE_STYLE_JS):
        assert "mono" in style["font"].lower(), (name, style)
        assert style["lineHeight"] <= 1.6 * style["size"], (name, style)
    return {"images": imgs, "widgets": views}


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
            _block_outside(page, external)
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
    # Everything the page needs is served from the installed wheels and ctxnb's template.
    assert external == []


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_renders_in_voila(tutorial: Path, tmp_path: Path) -> None:
    """Voilà runs the tutorial; every plot it draws is an image, every widget shows."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    plots, widgets = expected_outputs(tutorial)
    external: list[tuple[str, str]] = []
    # The folder is served in place: tutorials read ../data and write only to temp dirs.
    with _voila(tutorial.parent, tmp_path, tmp_path / "voila.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            _block_outside(page, external)
            page.goto(
                f"{url}voila/render/{tutorial.name}",
                timeout=RENDER_S * 1000,
                wait_until="domcontentloaded",
            )
            page.locator("#rendered_cells").wait_for(state="visible", timeout=RENDER_S * 1000)
            _check_rendered(page, f"voila-{tutorial.stem}", plots, widgets)
            if page.locator(".ctxnb-replay-view").count():
                _step_replay_view(page, tutorial.stem)
        finally:
            browser.close()
    assert external == [], external


def _step_replay_view(page: Any, name: str) -> None:
    """Move the ReplayView's slider one step with the keyboard; the step payload follows."""
    view = page.locator(".ctxnb-replay-view").first
    detail = view.locator(".ctxnb-replay-step")
    before = detail.inner_text()
    assert "step " in before and "masked" in before
    handle = view.locator(".noUi-handle, .slider-handle, [role=slider]").first
    handle.focus()
    handle.press("ArrowRight")
    _wait_until(lambda: detail.inner_text() != before, DECISION_S, "the next step to render")
    after = detail.inner_text()
    n_before = int(before.split("step ", 1)[1].split()[0])
    assert f"step {n_before + 1}" in after, after[:200]
    bars = view.locator(".ctxnb-replay-chart svg")
    assert bars.count() >= 2 and bars.first.bounding_box()["height"] > 10
    view.screenshot(path=str(ARTIFACTS / f"voila-{name}-replay-view.png"))


@contextlib.contextmanager
def _jupyterlab(root: Path, tmp: Path) -> Iterator[str]:
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        # A private configuration: no user settings, workspaces or extensions leak in.
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
        # The server itself reaches nothing outside either (no extension index look-ups).
        "--LabApp.extension_manager=readonly",
        "--allow-root",  # CI containers run as root
    ]
    with _serving(cmd, root, env, tmp / "jupyterlab.log", port) as url:
        yield url


_RUN_ALL_JS = """
async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  await app.commands.execute('notebook:run-all-cells');
}
"""


def test_a_tutorial_runs_in_jupyterlab(tmp_path: Path) -> None:
    """Tutorial 04 (a plot and a widget), its stored outputs cleared, run in JupyterLab."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    source = next(p for p in TUTORIALS if p.name.startswith("04-"))
    plots, widgets = expected_outputs(source)
    assert plots and widgets
    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, root / source.name)
    external: list[tuple[str, str]] = []
    with _jupyterlab(root, tmp_path) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            _block_outside(page, external)
            page.goto(f"{url}lab/tree/{source.name}", timeout=RENDER_S * 1000)
            page.locator(".jp-NotebookPanel").wait_for(state="visible", timeout=RENDER_S * 1000)
            _wait_until(
                lambda: page.evaluate(
                    "() => !!(window.jupyterapp && window.jupyterapp.shell"
                    " && window.jupyterapp.shell.currentWidget)"
                ),
                RENDER_S,
                "JupyterLab to open the notebook",
            )
            assert page.locator(".jp-OutputArea-output img").count() == 0  # nothing stored
            page.evaluate(_RUN_ALL_JS)
            _check_rendered(page, f"jupyterlab-{source.stem}", plots, widgets)
        finally:
            browser.close()
    assert external == [], external


_RUN_UP_TO_JS = """
async (idx) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  panel.content.activeCellIndex = idx;
  await app.commands.execute('notebook:run-all-above');
  await app.commands.execute('notebook:run-cell');
}
"""

_RUN_FROM_JS = """
async (idx) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  panel.content.activeCellIndex = idx;
  await app.commands.execute('notebook:run-all-below');
}
"""

# Each code cell: whether it ran (an execution count) and the errors among its outputs.
_CELLS_JS = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {
    idle: !!kernel && kernel.status === 'idle',
    cells: panel.content.widgets.filter((c) => c.model.type === 'code').map((c) => ({
      ran: c.model.executionCount !== null && c.model.executionCount !== undefined,
      errors: c.model.outputs.toJSON().filter((o) => o.output_type === 'error')
        .map((o) => o.ename + ': ' + o.evalue),
    })),
  };
}
"""


_OUTPUTS_JS = """
() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter((c) => c.model.type === 'code')
  .map((c) => JSON.stringify(c.model.outputs.toJSON())).join('\\n')
"""


@pytest.mark.parametrize("answer", ["Approve", "Reject"])
def test_tutorial_02_approve_or_reject_by_click_then_the_next_cells_run(
    answer: str, tmp_path: Path
) -> None:
    """Tutorial 02 in JupyterLab, as a reader runs it: the cells up to the approval panel,
    a click on Approve or Reject, then every cell after it, with no error."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    source = next(p for p in TUTORIALS if p.name.startswith("02-"))
    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    panel_at = next(i for i, c in enumerate(nb.cells) if "ApprovalPanel(" in c.source)
    nbformat.write(nb, root / source.name)
    external: list[tuple[str, str]] = []
    with _jupyterlab(root, tmp_path) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            _block_outside(page, external)
            page.goto(f"{url}lab/tree/{source.name}", timeout=RENDER_S * 1000)
            page.locator(".jp-NotebookPanel").wait_for(state="visible", timeout=RENDER_S * 1000)
            _wait_until(
                lambda: page.evaluate(
                    "() => !!(window.jupyterapp && window.jupyterapp.shell"
                    " && window.jupyterapp.shell.currentWidget)"
                ),
                RENDER_S,
                "JupyterLab to open the notebook",
            )
            page.evaluate(_RUN_UP_TO_JS, panel_at)
            button = page.locator(f".ctxnb-{answer.lower()}")
            button.wait_for(state="visible", timeout=RENDER_S * 1000)
            _wait_until(lambda: button.is_enabled(), DECISION_S, "a pending request")
            # What the human decides on: a coloured diff, the risk, the time left.
            detail = page.locator(".ctxnb-approval-detail")
            assert detail.locator("pre.ctxnb-diff").count() == 1
            assert "-// generated" in detail.locator("pre.ctxnb-diff").inner_text()
            assert detail.locator(".ctxnb-risk").inner_text() == "DESTRUCTIVE"
            countdown = page.locator(".ctxnb-approval-countdown")
            assert "s left to decide" in countdown.inner_text()
            # The toggle redraws the diff side by side (the deleted bundle's line on the
            # left, nothing on the right), and back; the request stays pending meanwhile.
            toggle = page.locator(".ctxnb-diff-layout button", has_text="side by side")
            toggle.click()
            table = detail.locator("table.ctxnb-diff-sbs")
            _wait_until(lambda: table.count() == 1, DECISION_S, "the side-by-side diff")
            row = table.locator("tr", has_text="// generated")
            cells = [c.strip() for c in row.locator("td").all_inner_texts()]
            assert cells == ["1", "// generated", "", ""], cells
            assert detail.locator("pre.ctxnb-diff").count() == 0
            page.screenshot(path=str(ARTIFACTS / f"jupyterlab-02-{answer}-side-by-side.png"))
            page.locator(".ctxnb-diff-layout button", has_text="unified").click()
            unified = detail.locator("pre.ctxnb-diff")
            _wait_until(lambda: unified.count() == 1, DECISION_S, "the unified diff")
            assert button.is_enabled()
            page.screenshot(path=str(ARTIFACTS / f"jupyterlab-02-{answer}-pending.png"))

            button.click()
            status = page.locator(".ctxnb-approval-status")
            word = "approved" if answer == "Approve" else "rejected"
            _wait_until(
                lambda: f"{word} by tutorial reviewer" in status.inner_text(),
                DECISION_S,
                "the panel to show the decision",
            )
            page.evaluate(_RUN_FROM_JS, panel_at + 1)

            def finished() -> dict[str, Any] | None:
                state = page.evaluate(_CELLS_JS)
                errors = [e for c in state["cells"] for e in c["errors"]]
                assert not errors, f"a cell after the {answer} click failed: {errors}"
                done = state["idle"] and all(c["ran"] for c in state["cells"])
                return state if done else None

            _wait_until(finished, RENDER_S, "every cell after the click to run", 1.0)
            page.screenshot(path=str(ARTIFACTS / f"jupyterlab-02-{answer}-done.png"))
            # The answer reached the waiting call: its result, and AGENT.md's Decisions.
            outputs = page.evaluate(_OUTPUTS_JS)
            assert ("'error_code': 'APPROVAL_REJECTED'" in outputs) == (answer == "Reject")
            refused = "'rm -rf build/assets' were refused by tutorial reviewer"
            assert (refused in outputs) == (answer == "Reject")
        finally:
            browser.close()
    assert external == [], external
