"""The docs cannot go stale: their code runs, the CLI reference is generated and checked.

* Every ```python block of every ``docs/*.md`` runs. The blocks of one file run in
  order in one fresh namespace (a real, temporary module), with the working directory
  set to an empty temporary directory (``tempfile`` also creates its directories under
  the test's own temporary directory), so a file reads as one script. A file without
  python blocks is not collected; a block that must not run uses another fence info
  (```text, ```json, ```console …). There is one test per file, so a failure names
  the file, the block number and its line.
* ``docs/cli.md`` equals what ``scripts/gen_cli_docs.py`` writes now.
* README.md's first screen tells a newcomer how to run the demo and the tests.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
PYTHON_INFOS = frozenset({"python", "py", "python3"})

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced code block of a markdown file."""

    info: str  # the first word of the info string, lowercased ("" when none)
    line: int  # 1-based line number of the first line of code (after the fence)
    code: str


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of a markdown text, in order (CommonMark fence rules).

    A block closes at a fence of the same character that is at least as long as the
    opening one; an unclosed block runs to the end of the text. Content is dedented by
    the opening fence's indentation, so blocks inside list items work too.
    """
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if m is None or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        words = m["info"].strip().split() or [""]
        # `needs-server` after the language: an example that talks to a server the
        # reader starts first; its own test (tests/integrations/test_mcp.py) starts one for it.
        info = "" if "needs-server" in words[1:] else words[0].lower()
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            line = lines[j]
            strip = min(indent, len(line) - len(line.lstrip(" \t")))
            body.append(line[strip:])
            j += 1
        blocks.append(CodeBlock(info, i + 2, "\n".join(body) + ("\n" if body else "")))
        i = j + 1
    return blocks


def python_blocks(path: Path) -> list[CodeBlock]:
    return [b for b in code_blocks(path.read_text(encoding="utf-8")) if b.info in PYTHON_INFOS]


def _docs_with_python() -> list[Path]:
    return [p for p in sorted(DOCS.glob("*.md")) if python_blocks(p)]


def test_code_blocks_parser() -> None:
    text = (
        "intro\n"
        "```python\nx = 1\n```\n"
        "````markdown\n```python\nnot run\n```\n````\n"
        "- item\n\n  ```python\n  if x:\n      y = 2\n  ```\n"
        "~~~json\n{}\n~~~\n"
    )
    blocks = code_blocks(text)
    assert [(b.info, b.line) for b in blocks] == [
        ("python", 3),
        ("markdown", 6),
        ("python", 13),
        ("json", 17),
    ]
    assert blocks[0].code == "x = 1\n"
    assert blocks[2].code == "if x:\n    y = 2\n"


@pytest.mark.parametrize("doc", _docs_with_python(), ids=lambda p: p.name)
def test_python_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every python block of one docs file, in order, in one namespace."""
    rel = doc.relative_to(REPO)
    work, scratch = tmp_path / "cwd", tmp_path / "tmp"
    work.mkdir()
    scratch.mkdir()
    monkeypatch.chdir(work)
    # tempfile.mkdtemp() in a block lands under tmp_path, which pytest cleans up.
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # A real module, so that dataclasses, pydantic models and pickling defined in a
    # block find their module the way they would in a user's script.
    name = "ctxnb_docs_" + re.sub(r"\W", "_", doc.stem)
    module = types.ModuleType(name)
    module.__file__ = str(doc)
    monkeypatch.setitem(sys.modules, name, module)
    blocks = python_blocks(doc)
    for number, block in enumerate(blocks, start=1):
        # Pad with blank lines so that tracebacks give the markdown file's line numbers.
        source = "\n" * (block.line - 1) + block.code
        failure = None
        try:
            exec(compile(source, str(doc), "exec"), module.__dict__)
        except (Exception, SystemExit) as e:  # a SystemExit from a block is a failure too
            # Skip this function's own frame: the traceback starts in the docs file.
            tb = e.__traceback__.tb_next if e.__traceback__ else None
            failure = "".join(traceback.format_exception(type(e), e, tb))
        if failure is not None:
            pytest.fail(
                f"{rel}: python block {number} of {len(blocks)} (line {block.line}) failed:\n"
                f"{failure}",
                pytrace=False,
            )


def _load_generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_docs", REPO / "scripts" / "gen_cli_docs.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cli_reference_is_up_to_date() -> None:
    gen = _load_generator()
    expected = gen.render()
    path = DOCS / "cli.md"
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    assert current == expected, (
        "docs/cli.md is out of date with `ctxnb --help`; run `python scripts/gen_cli_docs.py` "
        "and commit the result"
    )


def test_cli_reference_covers_every_command() -> None:
    from ctxnb.cli.app import _load_plugins, build_parser

    _load_plugins([])
    parser = build_parser()
    names = next(a.choices for a in parser._actions if a.choices and a.dest == "command")
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    missing = [n for n in names if f"## ctxnb {n}\n" not in text]
    assert not missing, f"docs/cli.md lacks {missing}; run `python scripts/gen_cli_docs.py`"


def test_llm_file_access_documents_every_tool() -> None:
    from ctxnb.tools.schemas import TOOL_INFO

    text = (DOCS / "LLM_FILE_ACCESS.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `(\w+)`", text, flags=re.M))
    wanted = {*TOOL_INFO, "select_active_intent", "run_command"}
    assert wanted <= headings, (
        f"docs/LLM_FILE_ACCESS.md has no '### `name`' section for {sorted(wanted - headings)}"
    )


def test_llm_file_access_json_examples_parse() -> None:
    doc = DOCS / "LLM_FILE_ACCESS.md"
    for block in code_blocks(doc.read_text(encoding="utf-8")):
        if block.info == "json":
            try:
                json.loads(block.code)
            except ValueError as e:
                pytest.fail(f"docs/LLM_FILE_ACCESS.md line {block.line}: invalid JSON: {e}")


def test_readme_first_screen_says_how_to_start() -> None:
    readme = REPO / "README.md"
    assert readme.is_file(), "README.md is missing"
    first_screen = "\n".join(readme.read_text(encoding="utf-8").splitlines()[:40])
    for command in ("make demo", "make test"):
        assert command in first_screen, (
            f"README.md's first 40 lines should mention `{command}` so a newcomer finds it"
        )


def _tool_sections(text: str) -> dict[str, str]:
    """The ``### `name` `` sections of docs/LLM_FILE_ACCESS.md, by tool name."""
    parts = re.split(r"^### `(\w+)`\n", text, flags=re.M)
    return {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts), 2)}


def _json_blocks(section: str) -> tuple[list[dict], list[dict]]:
    """A section's argument examples and its ``dispatch`` results, in order."""
    args, results = [], []
    for block in code_blocks(section):
        if block.info == "json":
            value = json.loads(block.code)
            (results if "ok" in value else args).append(value)
    return args, results


def _tool_arg_models() -> dict[str, type]:
    from ctxnb.govern.engine import SelectIntentArgs
    from ctxnb.sandbox.commands import RunCommandArgs
    from ctxnb.tools.schemas import TOOL_INFO

    models: dict[str, type] = {name: info.args for name, info in TOOL_INFO.items()}
    return {**models, "run_command": RunCommandArgs, "select_active_intent": SelectIntentArgs}


def test_llm_file_access_names_every_argument_and_its_examples_validate() -> None:
    # Generated from nothing, so tested against the schemas: an argument added to a tool
    # and not documented, or an example a model could not send, fails here.
    sections = _tool_sections((DOCS / "LLM_FILE_ACCESS.md").read_text(encoding="utf-8"))
    for name, model in _tool_arg_models().items():
        body = sections[name]
        missing = [f for f in model.model_fields if f"`{f}`" not in body and f'"{f}"' not in body]
        assert not missing, f"docs/LLM_FILE_ACCESS.md `{name}` does not name {missing}"
        args, _ = _json_blocks(body)
        assert args, f"docs/LLM_FILE_ACCESS.md `{name}` has no argument example"
        for example in args:
            model.model_validate(example)  # type: ignore[attr-defined]


def test_llm_file_access_results_have_the_keys_dispatch_returns(tmp_path: Path) -> None:
    # The read-only tools run on the sample workspace with the documented arguments: the
    # documented result has the same keys as the real one, at the top and in `result`.
    from ctxnb import Workspace
    from ctxnb.samples import copy_sample_workspace

    sections = _tool_sections((DOCS / "LLM_FILE_ACCESS.md").read_text(encoding="utf-8"))
    root = copy_sample_workspace(tmp_path / "ws")
    with Workspace.open(root) as ws:
        tools = ws.tools(ws.session("docs"), caller="docs")
        checked = []
        for name in (
            "list_files",
            "read_file",
            "read_lines",
            "get_excerpt",
            "get_file_history",
            "summarize_file",
            "search",
            "glob",
        ):
            args, results = _json_blocks(sections[name])
            real, shown = tools.dispatch(name, args[0]), results[0]
            assert real["ok"], (name, real)
            assert set(real) == set(shown), f"`{name}`: dispatch returns {sorted(real)}"
            r, s = real["result"], shown["result"]
            if isinstance(r, list) and r and isinstance(r[0], dict):
                r, s = r[0], s[0]
            if isinstance(r, dict):
                assert set(r) == set(s), f"`{name}` result: dispatch returns {sorted(r)}"
            checked.append(name)
    assert len(checked) == 8


def test_readme_reading_the_store_from_outside_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's store examples run in a workspace ctxnb indexed: the first with the
    core install's pandas and pyarrow alone, the DuckDB one with the duckdb it names."""
    from ctxnb import Workspace
    from ctxnb.samples import copy_sample_workspace

    root = copy_sample_workspace(tmp_path)
    ws = Workspace.open(root)
    ws.index(progress=False)
    ws.close()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Reading the store from outside", 1)[1].split("\n## ", 1)[0]
    core, with_duckdb = [b.code for b in code_blocks(section) if b.info == "python"]
    assert "duckdb" not in core and "pip install duckdb" in section
    monkeypatch.chdir(root)
    names: dict[str, object] = {}
    exec(compile(core, "README core example", "exec"), names)
    by_type = names["versions"].groupby("type").size()  # type: ignore[attr-defined]
    assert by_type["file"] >= 15
    assert names["table"].num_rows == len(names["versions"])  # type: ignore[attr-defined]
    lines = with_duckdb.rstrip().splitlines()
    lines[-1] = "result = " + lines[-1]  # the block's last expression, as a REPL shows it
    exec(compile("\n".join(lines), "README DuckDB example", "exec"), names)
    assert dict(names["result"].fetchall())["file"] == by_type["file"]  # type: ignore[attr-defined]
