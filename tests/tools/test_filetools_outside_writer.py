"""Governed writes against a real concurrent writer process: no outside save is lost.

Another program (an editor, a formatter) saves the same file while the agent keeps
editing it. Every one of its saves must survive: on disk at the end, or stored as a
version, because the governed write re-checks the file right before it replaces it and
refuses with ``STALE_FILE`` (keeping the other program's bytes) when it changed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ctxnb import Workspace
from ctxnb.errors import PolicyError

SAVES = 60

_WRITER = r"""
import os, random, sys, time
from ctxnb.store.objectstore import ObjectStore
path, n, store_dir, oid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
store = ObjectStore(store_dir, create=False)
rng = random.Random(7)
print("ready", flush=True)
for i in range(n):
    data = f"outside {i}\n".encode()
    if i % 2:  # as editors and git do: a new file renamed over the old one
        tmp = f"{path}.save-{i}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    else:  # as many tools do: rewrite the same file in place
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(data)
    # The next save only once ctxnb has seen this one (or it is lost: then give up on
    # it), so that this writer never overwrites its own saves.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(v.doc.get("content") == data.decode() for v in store.history(oid)):
            break
        time.sleep(0.002)
    time.sleep(rng.uniform(0.0, 0.01))
print("done", flush=True)
"""


def test_no_outside_save_is_overwritten_by_a_governed_write(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    target = root / "shared.txt"
    target.write_text("start\n")
    ws = Workspace.open(root)
    ws.index(progress=False)
    tools = ws.tools(ws.session("race"), caller="test")
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WRITER,
            str(target),
            str(SAVES),
            str(ws.store.path),
            ws.object_id("shared.txt"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    agent_writes = stale = 0
    deadline = time.monotonic() + 300
    while writer.poll() is None and time.monotonic() < deadline:
        read = tools.read_file("shared.txt")
        try:
            result = tools.write_file(
                "shared.txt", f"agent {agent_writes}\n", expected_sha256=read.sha256
            )
        except PolicyError as exc:
            assert exc.error_code == "STALE_FILE", exc
            stale += 1
            continue
        if result.success:
            agent_writes += 1
        else:
            stale += 1
    assert writer.wait(timeout=60) == 0
    writer.stdout.close()
    tools.read_file("shared.txt")  # the last outside save, if it is the one on disk
    stored = {v.doc["content"] for v in ws.history("shared.txt")}
    on_disk = target.read_text()
    lost = [i for i in range(SAVES) if f"outside {i}\n" not in stored | {on_disk}]
    ws.close()
    assert agent_writes >= 10 and stale >= 1, (agent_writes, stale)  # the race really ran
    # A save by rename (editors, git) is never lost: the re-check and the exchange see it.
    renamed = [i for i in lost if i % 2]
    assert renamed == [], f"{len(renamed)} of {SAVES // 2} renamed saves lost: {renamed}"
    # A save in place through a descriptor opened before the exchange can land in the
    # displaced file after ctxnb checked it; no rename protocol can see that write
    # (docs/store-format.md, "Outside edits"). It is rare; it is bounded here, not hidden.
    assert len(lost) <= 2, f"{len(lost)} of {SAVES // 2} in-place saves lost: {lost}"
