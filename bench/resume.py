"""Resume a session that holds every file of the standard library corpus.

Nothing changed since the session was saved: resume (restore the sets, batch-fetch the
objects, rebuild metadata, re-check every file) vs ``git status --porcelain`` on the
same tree, in the same run. Target: ≤ 2x git status.

Usage: python bench/resume.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import copy_corpus, git_env  # noqa: E402

from ctxnb import Workspace  # noqa: E402


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="ctxnb-bench-resume-"))
    try:
        root = copy_corpus(base / "stdlib")
        env = git_env()
        subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
        (root / ".git" / "info" / "exclude").write_text(".ctxnb/\n")
        time.sleep(2.1)  # past the racy-clean window, as a real tree is

        ws = Workspace.open(root)
        rep = ws.index(progress=False)
        s = ws.session("bench-resume")
        for rel in sorted(rep.changed_paths):
            s.add(ws.object_id(rel), activate=False)
        s.save()
        n = len(s.session_index)
        ws.session("bench-resume")  # records the stat cache for every file

        def resume_times() -> list[float]:
            out = []
            for _ in range(7):
                t = time.perf_counter()
                r = ws.session("bench-resume")
                out.append(time.perf_counter() - t)
                hashed.append(r.last_resume.hashed)
                assert not r.last_resume.updated and not r.last_resume.deleted
            return out

        hashed: list[int] = []
        pending = ws.store.pending_segments()
        uncompacted = resume_times()
        ws.store.compact()  # what ws.index() does once 32 transactions wait
        times = resume_times()
        git = []
        for _ in range(7):
            t = time.perf_counter()
            subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True,
                           capture_output=True, env=env)  # fmt: skip
            git.append(time.perf_counter() - t)
        mr, mg = statistics.median(times), statistics.median(git)
        print(f"session with {n} files, nothing changed (files re-hashed: {max(hashed)})")
        mu = statistics.median(uncompacted)
        print(f"resume, {pending} uncompacted txs median {mu * 1000:8.1f} ms")
        print(f"resume, compacted store median {mr * 1000:8.1f} ms")
        print(f"git status --porcelain median {mg * 1000:8.1f} ms")
        print(f"  ratio {mr / mg:.2f}x  (target <= 2x)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
