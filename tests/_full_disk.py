"""Governed writes on a real, nearly full filesystem: a tmpfs of a few MiB, filled with
ballast up to a given number of free bytes before each write.

Run as a script inside a private mount namespace (``unshare --mount``, see
``tests/tools/test_write_full_disk.py``), it mounts the tmpfs itself, so no mount outlives
it. For each ``(budget, size)`` it prints one JSON line: what ``write_file`` answered
and what was found afterwards on disk, in the store and in its log. ``op`` is a
``write_file``, a deletion through ``apply_patch``, or a sandboxed ``command`` whose
change is committed from its overlay.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from _tracewal_setup import governed, tools_of

from ctxnb.store._attach import attached_lines
from ctxnb.store.objectstore import ObjectStore

OLD = "a = 1\n" * 10


def new_text(size: int) -> str:
    """About ``size`` bytes of Python that compress badly (Parquet cannot shrink it much)."""
    return "".join(f"b{i} = {i * 7919 % 10007}\n" for i in range(max(1, size // 12)))


def _fill(mnt: Path, budget: int) -> Path:
    """Leave about ``budget`` bytes free on ``mnt`` (tmpfs counts in pages)."""
    ballast = mnt / "ballast"
    st = os.statvfs(mnt)
    with open(ballast, "wb") as f:
        try:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - budget))
        except OSError:
            pass
    return ballast


def one(mnt: Path, budget: int, size: int, op: str) -> dict[str, object]:
    for p in mnt.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    root = mnt / "ws"
    (root / "inventory").mkdir(parents=True)
    (root / "inventory" / "a.py").write_text(OLD)
    governed(root)
    ws, tools = tools_of(root)
    read = tools.read_file("inventory/a.py")
    new = new_text(size)
    ballast = _fill(mnt, budget)
    if op == "write":
        out = tools.dispatch(
            "write_file",
            {"path": "inventory/a.py", "content": new, "expected_sha256": read.sha256},
        )
    elif op == "command":  # a sandboxed command's change, committed from its overlay
        lines = max(1, size // 12)
        # Appended: the old lines stay, so no approver is needed (not destructive).
        new = OLD + "".join(f"b{i} = {i}\n" for i in range(1, lines + 1))
        out = tools.dispatch(
            "run_command",
            {"cmd": f"seq 1 {lines} | sed 's/.*/b& = &/' >> inventory/a.py", "shell": True},
        )
    else:  # a deletion through a patch
        out = tools.dispatch(
            "apply_patch",
            {
                "path": "inventory/a.py",
                "unified_diff": "--- a/inventory/a.py\n+++ /dev/null\n@@ -1,10 +0,0 @@\n"
                + "".join("-" + line + "\n" for line in OLD.splitlines()),
                "expected_sha256": read.sha256,
            },
        )
    oid = ws.object_id("inventory/a.py")
    try:
        ws.close()
    except Exception:  # noqa: BLE001 - a full disk may refuse the close's fold: nothing is lost
        pass
    ballast.unlink()
    path = root / "inventory" / "a.py"
    disk = path.read_text() if path.exists() else None
    store_dir = root / ".ctxnb" / "store"
    with ObjectStore(store_dir, create=False) as store:
        history = store.history(oid)
        versions = [v.doc.get("content") for v in history]
        logged = {ln.tx for ln in attached_lines(store_dir) for a in ln.attached}
        want = new if op in ("write", "command") else None
        acked_tx = [v.tx_id for v in history[1:] if v.doc.get("content") == want]
    temps = [p.name for p in (root / "inventory").iterdir() if p.name.startswith(".ctxnb-tmp")]
    if op == "command":  # acknowledged: listed as changed by the command's result
        effects = out.get("result", {}).get("effects", {}) if out["ok"] else {}
        acked = any(c["path"] == "inventory/a.py" for c in effects.get("changed", []))
    else:
        acked = bool(out["ok"])
    return {
        "budget": budget,
        "acked": acked,
        "size": size,
        "op": op,
        "ok": out["ok"],
        "code": out.get("error_code"),
        "disk_old": disk == OLD,
        "disk_new": disk == (new if op in ("write", "command") else None),
        "versioned": bool(acked_tx),
        "traced": any(tx in logged for tx in acked_tx),
        "latest_is_disk": versions[-1] == disk,
        "temps": temps,
    }


def main() -> None:
    mnt = Path(sys.argv[1])
    budgets = [int(x) for x in sys.argv[2].split(",")]
    sizes = [int(x) for x in sys.argv[3].split(",")]
    ops = sys.argv[4].split(",")
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    for op in ops:
        for size in sizes:
            for budget in budgets:
                print(json.dumps(one(mnt, budget, size, op)), flush=True)


if __name__ == "__main__":
    main()
