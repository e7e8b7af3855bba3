"""Build tests/data/git/pywinauto-eol.bundle: real line-ending history for the patch tests.

The source is pywinauto (https://github.com/pywinauto/pywinauto, BSD 3-clause), whose
history mixes CRLF, LF and mixed-ending files. The bundle keeps a chosen set of small
files along the first-parent history: each commit of the bundle holds those files as
one original commit left them, so the diff between two consecutive bundle commits is
that original commit's diff for those files (modifications, additions, deletions,
renames, line-ending conversions). Run:

    python scripts/make_eol_fixture.py /path/to/pywinauto/clone tests/data/git/pywinauto-eol.bundle
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter

MAX_BLOB = 24_000  # bytes: keeps the bundle small
MAX_COMMITS = 10_000


def git(repo: str, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-C", repo, *args], input=data, capture_output=True, check=True
    ).stdout


def kind(data: bytes) -> str:
    cr = data.count(b"\r\n")
    lf = data.count(b"\n") - cr
    return "crlf" if cr and not lf else "mixed" if cr else "lf"


def main(src: str, out: str) -> None:
    revs = git(src, "rev-list", "--first-parent", "--reverse", "HEAD").decode().split()
    sizes: dict[str, int] = {}
    for line in git(src, "cat-file", "--batch-all-objects", "--batch-check").decode().splitlines():
        sha, typ, size = line.split()
        if typ == "blob":
            sizes[sha] = int(size)
    # Paths whose every version is small, text and present in the clone.
    trees: list[tuple[str, dict[str, str]]] = []
    ok: dict[str, bool] = {}
    for c in revs:
        entries: dict[str, str] = {}
        for line in git(src, "ls-tree", "-r", c).decode(errors="surrogateescape").splitlines():
            meta, path = line.split("\t", 1)
            mode, typ, sha = meta.split()
            if typ != "blob" or mode != "100644":
                continue
            entries[path] = sha
            good = sizes.get(sha, MAX_BLOB + 1) <= MAX_BLOB
            ok[path] = ok.get(path, True) and good
        trees.append((c, entries))
    # Prefer paths that ever held a CR: the point of the fixture.
    with_cr: set[str] = set()
    cat = subprocess.Popen(
        ["git", "-C", src, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert cat.stdin and cat.stdout
    blobs: dict[str, bytes] = {}

    def blob(sha: str) -> bytes:
        if sha not in blobs:
            cat.stdin.write(sha.encode() + b"\n")
            cat.stdin.flush()
            n = int(cat.stdout.readline().split()[2])
            blobs[sha] = cat.stdout.read(n)
            cat.stdout.read(1)
        return blobs[sha]

    keep_ext = (".py", ".txt", ".TXT", ".cfg", ".ini", ".bat", ".html", ".xml")
    for _c, entries in trees:
        for path, sha in entries.items():
            if ok.get(path) and path.endswith(keep_ext) and b"\r" in blob(sha):
                with_cr.add(path)
    chosen = with_cr
    commits: list[tuple[str, dict[str, str]]] = []
    prev: dict[str, str] = {}
    for c, entries in trees:
        sub = {p: s for p, s in entries.items() if p in chosen}
        if sub != prev:
            commits.append((c, sub))
            prev = sub
    commits = commits[:MAX_COMMITS]
    kinds: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "init", "-q", "-b", "main", tmp], check=True)
        stream: list[bytes] = []
        prev = {}
        for n, (c, sub) in enumerate(commits):
            subject = git(src, "log", "-1", "--format=%s", c).decode(errors="replace")
            when = git(src, "log", "-1", "--format=%at %ai", c).decode().split()
            msg = f"{subject}\n\npywinauto {c}\n".encode()
            stream.append(b"commit refs/heads/main\n")
            stream.append(f"mark :{n + 1}\n".encode())
            stream.append(f"committer fixture <fixture@example.invalid> {when[0]} +0000\n".encode())
            stream.append(b"data %d\n" % len(msg) + msg)
            if n:
                stream.append(f"from :{n}\n".encode())
            for path in sorted(prev.keys() - sub.keys()):
                stream.append(f"D {path}\n".encode())
                kinds["D"] += 1
            for path, sha in sorted(sub.items()):
                if prev.get(path) == sha:
                    continue
                data = blob(sha)
                if path in prev:
                    kinds[f"{kind(blob(prev[path]))}->{kind(data)}"] += 1
                else:
                    kinds["A"] += 1
                stream.append(f"M 100644 inline {path}\n".encode())
                stream.append(b"data %d\n" % len(data) + data + b"\n")
            prev = sub
        git(tmp, "fast-import", "--quiet", data=b"".join(stream))
        git(tmp, "gc", "-q", "--aggressive", "--prune=now")
        git(tmp, "bundle", "create", "-q", os.path.abspath(out), "main")
    print(len(commits), "commits,", len(chosen), "paths;", dict(kinds))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
