"""``ws.why(file)`` on a large ledger: what checking every record costs the reader.

The ledger holds ``RECORDS`` records (a few files, ranges spread over them), of which
``LOGGED`` were committed with a store version and so have a copy in the store's log to
be compared with. Paired in one run, alternating, on the same ledger:

* the ledger read ``why`` did before it checked anything: ``TraceLedger.records(file=…)``
  (one ``json.loads`` per line), the baseline;
* the checked read ``why`` does now: ``check_ledger`` keeping the file's records (the
  same parse, a SHA-256 per line, the head, the store log's copies);
* the whole ``ws.why(file)``, for scale.

Usage: python bench/why_ledger.py [RECORDS] [LOGGED]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ctxnb import Workspace
from ctxnb.govern import init_governance
from ctxnb.govern.ledger import TraceLedger, build_trace_record
from ctxnb.govern.record import FileChange, Origin, Recorder

FILES = [f"pkg/m{n}.py" for n in range(8)]
LINES = 400


def _text(k: int) -> str:
    return "".join(f"v_{k}_{i} = {i}\n" for i in range(LINES))


def main() -> None:
    n_records = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    n_logged = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-whyledger-"))
    try:
        root = base / "ws"
        (root / "pkg").mkdir(parents=True)
        init_governance(root)
        for k, rel in enumerate(FILES):
            (root / rel).write_text(_text(k))
        ws = Workspace.open(root)
        ws.observe(FILES)
        ledger = TraceLedger(root / ".orchestration" / "agent_trace.jsonl")
        batch = []
        for k in range(n_records - n_logged):
            rel = FILES[k % len(FILES)]
            start = 1 + (k * 7) % (LINES - 3)
            batch.append(
                build_trace_record(
                    file_path=rel,
                    ranges=[(start, start + 2)],
                    new_text=_text(k % len(FILES)),
                    intent_id="INT-1",
                    session_id=None,
                    model_id="acme/bench",
                    repo_root=None,
                    tool="apply_patch",
                )
            )
            if len(batch) == 500:
                ledger.append_many_later(batch)()
                batch = []
        if batch:
            ledger.append_many_later(batch)()
        recorder = Recorder(root)
        for k in range(n_logged):
            rel = FILES[k % len(FILES)]
            text = _text(k % len(FILES)).replace("= 1\n", f"= {k}\n", 1)
            pending = recorder.prepare_logged(
                FileChange(rel, old=None, new=text),
                Origin("write_file", caller="bench", intent_id="INT-1"),
                oid=ws.object_id(rel),
                store_dir=ws.store.path,
            )
            (root / rel).write_text(text)
            obs = ws.observe([rel], data=[text.encode()], attached=[pending.attachment])[0]
            recorder.finish_logged(pending, obs.tx_id)
        ws.close()

        try:
            from ctxnb.govern.ledgercheck import check_ledger
        except ImportError:  # a ctxnb from before the verifier: ws.why alone, to compare
            check_ledger = None  # type: ignore[assignment]

        path, target = ledger.path, FILES[0]
        print(f"ledger: {n_records} records, {path.stat().st_size / 1e6:.1f} MB")
        if check_ledger is not None:
            verdicts = list(check_ledger(path).integrity.values())
            print("verdicts:", {v: verdicts.count(v) for v in sorted(set(verdicts))})
        olds, news, whys = [], [], []
        for _ in range(7):
            t = time.perf_counter()
            n_old = sum(1 for _ in TraceLedger(path, validate=False).records(file=target))
            olds.append(time.perf_counter() - t)
            if check_ledger is not None:
                t = time.perf_counter()
                n_new = len(
                    check_ledger(
                        path,
                        keep=lambda rec: any(
                            f.get("path") == target for f in rec.get("files") or []
                        ),
                    ).records
                )
                news.append(time.perf_counter() - t)
                assert n_old == n_new, (n_old, n_new)
            ws = Workspace.open(root)
            t = time.perf_counter()
            ws.why(target, context=False)
            whys.append(time.perf_counter() - t)
            ws.close()
        mo, mw = statistics.median(olds), statistics.median(whys)
        print(f"records of {target}: {n_old}")
        print(f"unchecked read (before)     median {mo * 1000:8.1f} ms")
        if news:
            mn = statistics.median(news)
            print(f"checked read (every reader) median {mn * 1000:8.1f} ms")
        print(f"ws.why(file)                median {mw * 1000:8.1f} ms")
        if news:
            print(f"  ratio checked/unchecked read {mn / mo:.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
