import json
import os
import stat

import jsonschema
import pytest

from ctxnb import Workspace
from ctxnb.errors import PolicyError, StaleFileError
from ctxnb.hashing import sha256_hex
from ctxnb.tools.schemas import tool_schemas


@pytest.fixture
def ws(sample_ws):
    return Workspace.open(sample_ws)


@pytest.fixture
def tools(ws):
    return ws.tools(ws.session("ft"), caller="tests")


def test_read_file_returns_content_hash_and_version(tools, sample_ws):
    r = tools.read_file("inventory/models.py")
    data = (sample_ws / "inventory" / "models.py").read_bytes()
    assert r.content == data.decode()
    assert r.sha256 == sha256_hex(data)
    oid = tools.workspace.object_id("inventory/models.py")
    assert r.version_id == tools.session.store.history(oid)[-1].version_id
    assert r.total_lines == data.decode().count("\n")
    # the file is active in the session and a toolcall was recorded
    s = tools.session
    oid = tools.workspace.object_id("inventory/models.py")
    assert oid in s.active_set
    calls = [s.get(i) for i in s.session_index if s.metadata(i).type == "toolcall"]
    assert calls[-1]["tool"] == "read_file" and calls[-1]["file_refs"] == [oid]


def test_read_lines_and_excerpt(tools):
    r = tools.read_lines("inventory/models.py", 3, 5)
    assert (r.start_line, r.end_line) == (3, 5)
    assert r.content.count("\n") == 3
    e = tools.get_excerpt("inventory/models.py", max_lines=2)
    assert e.content.splitlines()[0].startswith('"""Items')
    with pytest.raises(PolicyError) as exc:
        tools.read_lines("inventory/models.py", 5, 2)
    assert exc.value.error_code == "BAD_RANGE"
    with pytest.raises(PolicyError):
        tools.read_lines("inventory/models.py", 9999, 10000)


def test_a_write_of_a_file_never_read_says_what_to_do_at_every_door(tools, sample_ws):
    """The refusal a Python caller sees as str(error) names the fix, not only the cause,
    and dispatch hands on the same text as a result; each fix it names then works."""
    before = (sample_ws / "README.md").read_bytes()
    with pytest.raises(PolicyError) as exc:
        tools.write_file("README.md", "new\n")
    said = str(exc.value)
    assert exc.value.error_code == "READ_BEFORE_WRITE"
    assert "has not read it" in said  # the cause
    assert "read it first (read_file('README.md'))" in said  # the fix, in the message
    assert "pass the sha256 of the copy the edit is based on as expected_sha256" in said
    assert exc.value.required_action.startswith("Read it first (read_file('README.md'))")
    out = tools.dispatch("write_file", {"path": "README.md", "content": "new\n"})
    assert out["ok"] is False and out["error_code"] == "READ_BEFORE_WRITE"
    assert out["message"] == said  # one message for every door
    assert out["required_action"] == exc.value.required_action
    # apply_patch names the same fix; propose_merge names its own base argument.
    with pytest.raises(PolicyError) as patch:
        first = before.decode().splitlines()[0]
        diff = f"--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-{first}\n+changed\n"
        tools.apply_patch("README.md", diff)
    assert "read_file('README.md')" in str(patch.value) and "expected_sha256" in str(patch.value)
    assert (sample_ws / "README.md").read_bytes() == before  # nothing written by a refusal
    # Each fix named works: the hash of the copy on disk, then a read.
    tools.write_file("README.md", "by hash\n", expected_sha256=sha256_hex(before))
    other = tools.workspace.tools(tools.workspace.session("ft-2"), caller="tests")
    other.read_file("README.md")
    assert other.write_file("README.md", "after a read\n").sha256 == sha256_hex(b"after a read\n")


def test_write_requires_read_or_hash_and_refuses_stale(tools, sample_ws):
    with pytest.raises(PolicyError) as exc:
        tools.write_file("README.md", "new\n")
    assert exc.value.error_code == "READ_BEFORE_WRITE"
    r = tools.read_file("README.md")
    (sample_ws / "README.md").write_text("changed behind the agent's back\n")
    with pytest.raises(StaleFileError) as exc:
        tools.write_file("README.md", "mine\n", expected_sha256=r.sha256)
    assert exc.value.error_code == "STALE_FILE"
    assert (sample_ws / "README.md").read_text() == "changed behind the agent's back\n"
    # without an explicit hash the last read hash is the lock
    with pytest.raises(StaleFileError):
        tools.write_file("README.md", "mine\n")
    r2 = tools.read_file("README.md")
    res = tools.write_file("README.md", "mine\n", expected_sha256=r2.sha256)
    assert res.success and (sample_ws / "README.md").read_text() == "mine\n"
    assert res.sha256 == sha256_hex(b"mine\n")
    assert "+mine" in res.diff


def test_write_modes_and_file_mode_kept(tools, sample_ws):
    script = sample_ws / "scripts" / "seed.sh"
    before = stat.S_IMODE(script.stat().st_mode)
    r = tools.read_file("scripts/seed.sh")
    assert tools.write_file(
        "scripts/seed.sh", "#!/bin/sh\necho hi\n", expected_sha256=r.sha256
    ).success
    assert stat.S_IMODE(script.stat().st_mode) == before == 0o755
    r = tools.read_file("scripts/seed.sh")
    tools.write_file("scripts/seed.sh", "echo more\n", mode="append", expected_sha256=r.sha256)
    assert script.read_text() == "#!/bin/sh\necho hi\necho more\n"
    assert tools.write_file("notes/new.md", "# new\n", mode="create").success is True
    with pytest.raises(PolicyError) as exc:
        tools.write_file("notes/new.md", "again\n", mode="create")
    assert exc.value.error_code == "FILE_EXISTS"
    hist = tools.get_file_history("scripts/seed.sh")
    assert [h.action for h in hist] == ["created", "updated", "updated"]


def test_apply_patch_and_conflict(tools, sample_ws):
    r = tools.read_file("inventory/models.py")
    diff = (
        "--- a/inventory/models.py\n+++ b/inventory/models.py\n"
        "@@ -14,3 +14,3 @@\n"
        "     name: str\n     unit_price_cents: int\n-    reorder_level: int = 5\n"
        "+    reorder_level: int = 10\n"
    )
    res = tools.apply_patch("inventory/models.py", diff, expected_sha256=r.sha256)
    assert res.success, res.message
    assert "reorder_level: int = 10" in (sample_ws / "inventory" / "models.py").read_text()
    # the same patch again no longer applies: conflict, nothing written
    before = (sample_ws / "inventory" / "models.py").read_bytes()
    res2 = tools.apply_patch("inventory/models.py", diff)
    assert not res2.success and res2.conflict and res2.failed_hunks
    assert (sample_ws / "inventory" / "models.py").read_bytes() == before
    out = tools.dispatch("apply_patch", {"path": "inventory/models.py", "unified_diff": "garbage"})
    assert out["ok"] is False and out["error_code"] == "INVALID_PATCH"


def test_write_patch_line_edits_and_overlap(tools, sample_ws):
    r = tools.read_file("docs/testing.md")
    res = tools.write_patch(
        "DOCS/Testing.md",
        r.sha256,
        [{"start_line": 1, "end_line": 1, "expected_original_lines": ["# How we test"],
          "new_lines": ["# How we test tinyinv"]}],
    )  # fmt: skip
    assert res.success
    assert (sample_ws / "docs" / "testing.md").read_text().startswith("# How we test tinyinv\n")
    r = tools.read_file("docs/testing.md")
    bad = tools.dispatch(
        "write_patch",
        {
            "doc_path": "docs/testing.md",
            "original_sha256": r.sha256,
            "edits": [
                {
                    "start_line": 2,
                    "end_line": 3,
                    "expected_original_lines": ["", "x"],
                    "new_lines": [],
                },
                {"start_line": 3, "end_line": 3, "expected_original_lines": ["x"], "new_lines": []},
            ],
        },
    )
    assert bad["ok"] is False and bad["error_code"] == "INVALID_PATCH"
    edit = {"start_line": 1, "end_line": 1, "expected_original_lines": ["x"], "new_lines": []}
    stale = tools.dispatch(
        "write_patch",
        {"doc_path": "docs/testing.md", "original_sha256": "0" * 64, "edits": [edit]},
    )
    assert stale["error_code"] == "STALE_FILE"


def test_active_copy_beats_disk_and_snippet_is_never_a_base(tools, sample_ws):
    unsaved = "# unsaved editor buffer\n"
    sha = tools.set_active_copy("README.md", unsaved)
    r = tools.read_file("README.md")
    assert r.content == unsaved and r.source == "active" and r.sha256 == sha
    assert tools.active_file_sha256("readme.md") == sha
    res = tools.write_patch(
        "README.md", sha,
        [{"start_line": 1, "end_line": 1, "expected_original_lines": ["# unsaved editor buffer"],
          "new_lines": ["# saved"]}],
    )  # fmt: skip
    assert res.success and (sample_ws / "README.md").read_text() == "# saved\n"
    snippet = "pytest, one test module per source module"
    ssha = tools.set_active_copy("docs/testing.md", snippet, source="rag-snippet")
    out = tools.dispatch(
        "write_file", {"path": "docs/testing.md", "content": "x", "expected_sha256": ssha}
    )
    assert out["error_code"] == "SNIPPET_NOT_EDIT_BASE"


def test_redaction_on_read_and_no_blind_write_back(tools, sample_ws):
    (sample_ws / "settings.py").write_text(
        'TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"\nDEBUG = True\n'
    )
    r = tools.read_file("settings.py")
    assert "ghp_" not in r.content and "[REDACTED:" in r.content and r.redactions == 1
    assert "ghp_abc" in (sample_ws / "settings.py").read_text()  # disk untouched
    out = tools.dispatch(
        "write_file",
        {"path": "settings.py", "content": r.content.replace("True", "False"),
         "expected_sha256": r.sha256},
    )  # fmt: skip
    assert out["error_code"] == "REDACTED_CONTENT"
    assert "ghp_abc" in (sample_ws / "settings.py").read_text()
    # an edit of the other lines works
    res = tools.write_patch(
        "settings.py", r.sha256,
        [{"start_line": 2, "end_line": 2, "expected_original_lines": ["DEBUG = True"],
          "new_lines": ["DEBUG = False"]}],
    )  # fmt: skip
    assert res.success and "ghp_abc" in (sample_ws / "settings.py").read_text()
    assert "ghp_" not in res.diff


def test_large_files_are_shaped_not_cut_silently(ws, sample_ws):
    big = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(3000))
    (sample_ws / "big.py").write_text(big)
    tools = ws.tools(ws.session("shape"), profile="local")
    r = tools.read_file("big.py")
    assert r.truncated and len(r.content) < len(big)
    assert "read_lines" in r.note
    excerpt, outline = r.content.split("excerpt ends at line", 1)
    cut = f"def f{r.end_line // 3}("  # the first function the excerpt left out
    assert cut not in excerpt and cut.replace("def ", "") in outline  # the outline covers it
    nxt = tools.read_lines("big.py", r.end_line + 1, r.end_line + 3)
    assert nxt.content.startswith(big.splitlines(keepends=True)[r.end_line])


def test_policy_applies_to_every_tool(tools):
    for name, args in [
        ("read_file", {"path": ".env"}),
        ("read_lines", {"path": "../../etc/passwd", "start": 1, "end": 2}),
        ("write_file", {"path": ".git/config", "content": "x"}),
        ("apply_patch", {"path": "/etc/hosts", "unified_diff": "@@ -1 +1 @@\n-a\n+b\n"}),
        ("get_diff", {"path": ".ctxnb/store/txlog"}),
        ("summarize_file", {"path": "sub/../.env"}),
        ("get_file_history", {"path": "secrets/id_rsa"}),
    ]:
        out = tools.dispatch(name, args)
        assert out["ok"] is False and out["error_code"] == "PATH_DENIED", (name, out)
        assert out["required_action"]
    assert ".env" not in tools.list_files()
    assert not any(h["path"] == ".env" for h in tools.search("SUPPLIER_API_TOKEN"))


def test_dispatch_errors_are_structured(tools):
    out = tools.dispatch("rm_rf", {})
    assert out["error_code"] == "UNKNOWN_TOOL" and "read_file" in out["required_action"]
    out = tools.dispatch("read_lines", {"path": "README.md", "start": "one"})
    assert out["error_code"] == "INVALID_ARGUMENTS" and "start" in out["message"]
    out = tools.dispatch("read_file", {"path": "nope.py"})
    assert out["error_code"] == "NOT_FOUND"
    ok = tools.dispatch("search", {"pattern": "stock_level"})
    assert ok["ok"] and any(h["path"] == "inventory/models.py" for h in ok["result"])


def test_a_lone_surrogate_in_any_argument_is_refused_and_audited_escaped(tools, sample_ws):
    # JSON can spell "\udcff", which is no text: no file name, content or log line holds
    # it. Every tool refuses it up front, nothing is written, and the audit keeps a line.
    before = {p.name for p in sample_ws.iterdir()}
    for name, args, where in [
        ("read_file", {"path": "README\udcff.md"}, "path"),
        ("write_file", {"path": "x.py", "content": "a = '\ud800'\n"}, "content"),
        ("search", {"pattern": "x", "glob": ["*.py", "a\udcff"]}, "glob.1"),
        ("get_diff", {"path": "README.md", "version2": "x\udcff"}, "version2"),
    ]:
        out = tools.dispatch(name, args)
        assert out["error_code"] == "INVALID_ARGUMENTS", (name, out)
        assert f"{name}: {where}: holds a lone surrogate" in out["message"], out
    assert {p.name for p in sample_ws.iterdir()} == before
    lines = (sample_ws / ".ctxnb" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    refused = [json.loads(x) for x in lines if "INVALID_ARGUMENTS" in x]
    assert len(refused) == 4 and refused[0]["args"]["path"] == "README\\udcff.md"
    assert tools.dispatch("read_file", {"path": "README.md"})["ok"]


def test_diff_and_history(tools, sample_ws):
    r = tools.read_file("web/app.js")
    tools.write_file("web/app.js", r.content + "// more\n", expected_sha256=r.sha256)
    hist = tools.get_file_history("web/app.js")
    assert len(hist) == 2
    d = tools.get_diff("web/app.js", hist[0].version_id, hist[1].version_id)
    assert d.added == 1 and d.removed == 0 and "+// more" in d.diff
    (sample_ws / "web" / "app.js").write_text("// rewritten\n")
    wt = tools.get_diff("web/app.js")
    assert wt.to_version == "working tree" and "+// rewritten" in wt.diff


def test_summarize_glob_list(tools):
    out = tools.summarize_file("inventory/models.py", max_tokens=200)
    assert "class Item" in out and "stock_level" in out
    assert tools.glob("inventory/*.py") == [
        "inventory/__init__.py", "inventory/models.py", "inventory/report.py", "inventory/store.py"
    ]  # fmt: skip
    files = tools.list_files(["*.md"])
    assert "AGENTS.md" in files and "docs/style.md" in files


def test_registry_frame(tools):
    tools.read_file("inventory/models.py")
    df = tools.registry()
    row = df.set_index("path").loc["inventory/models.py"]
    assert "code" in row["tags"] and row["version_id"]
    assert "test" in df.set_index("path").loc["tests/test_models.py"]["tags"]
    assert "doc" in df.set_index("path").loc["docs/style.md"]["tags"]
    assert ".env" not in set(df["path"])


def test_registry_shows_the_opt_in_sensitivity(sample_ws):
    """Old gap: files marked sensitive by ``[policy] sensitive`` looked like any other in
    the registry; the column says which, with the globs' gitignore semantics."""
    (sample_ws / "ctxnb.toml").write_text(
        '[policy]\nsensitive = ["inventory/models.py", "docs/", "# a comment"]\n'
    )
    ws = Workspace.open(sample_ws)
    df = ws.tools(ws.session("reg"), caller="tests").registry().set_index("path")
    marked = set(df.index[df["sensitive"]])
    assert "inventory/models.py" in marked and "docs/style.md" in marked
    assert "inventory/report.py" not in marked and "README.md" not in marked
    ws.close()
    (sample_ws / "ctxnb.toml").unlink()
    plain = Workspace.open(sample_ws)
    assert not plain.tools(plain.session("reg"), caller="tests").registry()["sensitive"].any()
    plain.close()


def test_audit_log_records_every_call_and_survives_a_cut_line(tools, ws):
    tools.read_file("README.md")
    tools.dispatch("read_file", {"path": ".env"})
    path = ws.root / ".ctxnb" / "audit.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"tool": "read_fi')  # a crash mid-line
    df = tools.audit()
    assert list(df["tool"]) == ["read_file", "read_file"]
    assert list(df["success"]) == [True, False]
    assert list(df["error_code"].fillna("")) == ["", "PATH_DENIED"]
    assert df.attrs["skipped_lines"] == 1
    assert df["duration_ms"].min() >= 0
    first = json.loads(path.read_text().splitlines()[0])
    assert first["before_sha256"] and first["caller"] == "tests"


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_tool_schemas_are_valid_json_schema(tools, fmt):
    schemas = tools.tool_schemas(fmt)
    assert len(schemas) == 15
    for t in schemas:
        params = {"openai": lambda x: x["function"]["parameters"],
                  "anthropic": lambda x: x["input_schema"],
                  "mcp": lambda x: x["inputSchema"]}[fmt](t)  # fmt: skip
        jsonschema.Draft202012Validator.check_schema(params)
        assert params["type"] == "object"
    assert tool_schemas("mcp")[1]["annotations"]["readOnlyHint"] is True


def test_symlink_and_special_files_refused(tools, sample_ws, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret outside\n")
    os.symlink(outside, sample_ws / "link.txt")
    out = tools.dispatch("read_file", {"path": "link.txt"})
    assert out["error_code"] == "PATH_DENIED"
    os.mkfifo(sample_ws / "pipe")
    assert tools.dispatch("read_file", {"path": "pipe"})["error_code"] == "PATH_DENIED"
