"""Processes that write to an ObjectStore, for the crash and concurrency tests.

Used two ways: as functions run in a forked child (``crash_loop``), and as a script
(``python tests/store_worker.py writer STORE NAME N GO_FILE``) for writers that race.

Every batch is a pure function of its number, so the test can say what a committed
transaction must contain without trusting the child.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pandas  # noqa: E402, F401  (pyarrow imports it on first use; do it before timing)

from ctxnb.store.objectstore import ObjectStore  # noqa: E402


def batch_docs(k: int) -> list[dict[str, Any]]:
    """The documents of batch ``k``: some new ones plus a new version of a shared one."""
    docs: list[dict[str, Any]] = [
        {
            "xt/id": f"b{k}-{i}",
            "type": "file" if i % 2 else "toolcall",
            "content": f"batch {k} doc {i} " + "x" * ((k * 37 + i * 101) % 3000),
            "char_count": k * 1000 + i,
            "file_refs": [f"b{k}-{j}" for j in range(i)],
            "args": {"k": k, "i": i, "nested": [i, None, {"deep": True}]},
            "chat_ref": None,
        }
        for i in range(1 + k % 9)
    ]
    docs.append({"xt/id": "counter", "type": "counter", "value": k})
    return docs


def crash_loop(
    store_dir: str,
    report_path: str,
    first_batch: int,
    compact_every: int,
    inline_max_bytes: int | None = None,
) -> None:
    """Commit batches forever; after each ``put`` returns, record it in ``report_path``.

    ``inline_max_bytes``: the store's limit for inline transactions (None: its default;
    0: every batch as a Parquet segment; a few KiB: some of each).
    """
    if inline_max_bytes is None:
        store = ObjectStore(store_dir)
    else:
        store = ObjectStore(store_dir, inline_max_bytes=inline_max_bytes)
    fd = os.open(report_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, b"ready\n")
    k = first_batch
    while True:
        tx = store.put(batch_docs(k))
        os.write(fd, json.dumps({"tx": tx.tx_id, "batch": k}).encode() + b"\n")
        k += 1
        if compact_every and k % compact_every == 0:
            store.compact()
            os.write(fd, b"compacted\n")


def writer(store_dir: str, name: str, n: int, go_file: str) -> None:
    """Wait for ``go_file``, then commit ``n`` transactions; print each tx id."""
    store = ObjectStore(store_dir)
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(go_file) and time.monotonic() < deadline:
        time.sleep(0.005)
    for i in range(n):
        docs = [
            {"xt/id": f"{name}-{i}-{j}", "type": "note", "writer": name, "i": i, "j": j}
            for j in range(3)
        ]
        docs.append({"xt/id": f"{name}-latest", "type": "note", "i": i})
        tx = store.put(docs)
        print(json.dumps({"tx": tx.tx_id, "i": i}), flush=True)
    store.close()


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "writer":
        writer(rest[0], rest[1], int(rest[2]), rest[3])
    elif mode == "crash":
        crash_loop(rest[0], rest[1], int(rest[2]), int(rest[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
