"""A governed writer to kill: it rewrites one file in a loop and reports what it acknowledged.

Run as a script (``tests/tools/test_write_crash.py``): ``ready`` once the workspace is
open, then for each write a line ``{"try": n, "sha": …}`` before the call and
``{"acked": n, "sha": …}`` once ``write_file`` returned success.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

from _tracewal_setup import tools_of


def content(seed: int, n: int) -> str:
    rng = random.Random(seed * 1_000_003 + n)
    size = rng.choice([200, 4_000, 30_000, 120_000])  # inline and Parquet segment commits
    return f"# write {seed}.{n}\n" + "".join(
        f"v{i} = {rng.randrange(10**9)}\n" for i in range(size // 16)
    )


def main() -> None:
    root, seed = Path(sys.argv[1]), int(sys.argv[2])
    _, tools = tools_of(root)
    # One read first: the workspace opens its store (and redaction its tokenizer) when
    # first used, and the kills are meant for the writes, not for that start-up.
    tools.read_file("inventory/a.py")
    print("ready", flush=True)
    for n in range(10**9):
        read = tools.read_file("inventory/a.py")
        text = content(seed, n)
        sha = hashlib.sha256(text.encode()).hexdigest()
        print(json.dumps({"try": n, "sha": sha}), flush=True)
        out = tools.dispatch(
            "write_file",
            {"path": "inventory/a.py", "content": text, "expected_sha256": read.sha256},
        )
        if out["ok"]:
            print(json.dumps({"acked": n, "sha": sha}), flush=True)


if __name__ == "__main__":
    main()
