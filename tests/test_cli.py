import json
import subprocess
import sys

from ctxnb.cli import main


def test_index_history_show(sample_ws, capsys, monkeypatch):
    assert main(["index", str(sample_ws), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "created" in out and "inventory/models.py" in out

    (sample_ws / "inventory" / "models.py").write_text("# replaced\n")
    assert main(["index", str(sample_ws), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["updated"] == 1

    monkeypatch.chdir(sample_ws)
    assert main(["history", "inventory/models.py"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and "created" in lines[1] and "updated" in lines[2]

    from ctxnb import Workspace

    oid = Workspace.open(sample_ws).object_id("inventory/models.py")
    assert main(["show", oid]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["content"] == "# replaced\n"
    assert main(["show", oid, "--as-of", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["content"] != "# replaced\n"


def test_errors_are_one_line_and_exit_1(sample_ws, capsys, monkeypatch):
    monkeypatch.chdir(sample_ws)
    assert main(["show", "no-such-id"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ctxnb show: error:") and "no-such-id" in err
    assert main(["history", "nope.py"]) == 1
    assert "ctxnb index" in capsys.readouterr().err
    assert main(["index", str(sample_ws / "missing")]) == 1


def test_python_dash_m(sample_ws):
    out = subprocess.run(
        [sys.executable, "-m", "ctxnb", "index", str(sample_ws), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["created"] > 5
