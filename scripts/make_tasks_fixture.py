"""Build a small git history from a real project, for the task-mining tests.

Each commit of the new history holds the tree of one first-parent commit of the source
(``START`` and every first-parent commit after it up to ``END``), with the original
author, committer, dates and message, so the diff between two consecutive commits is the
original commit's diff. A merge commit's message is followed by the messages of the
commits it merged (a pull request's merge says little by itself), and every message ends
with an ``Original-commit:`` trailer naming the source commit.

``--append PATH=SNIPPET`` appends the text of the file SNIPPET to every version of PATH
(the tests use this for a deliberately flaky test; the README beside the bundle says so).

Run:

    python scripts/make_tasks_fixture.py SRC_GIT_DIR START END OUT.bundle [--append P=F]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile


def git(repo: str, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", "-C", repo, *args],
        input=data,
        capture_output=True,
        check=True,
        env={**os.environ, **(env or {})},
    ).stdout.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("start")
    ap.add_argument("end")
    ap.add_argument("out")
    ap.add_argument("--append", action="append", default=[], metavar="PATH=SNIPPET")
    ns = ap.parse_args()
    appends = dict(a.split("=", 1) for a in ns.append)
    src = os.path.abspath(ns.src)
    end = git(src, "rev-parse", f"{ns.end}^{{commit}}").strip()
    revs = git(src, "rev-list", "--first-parent", "--reverse", f"{ns.start}..{end}").split()
    revs = [git(src, "rev-parse", f"{ns.start}^{{commit}}").strip(), *revs]
    with tempfile.TemporaryDirectory() as tmp:
        dst = os.path.join(tmp, "repo")
        subprocess.run(["git", "init", "-q", "-b", "main", dst], check=True)
        git(dst, "fetch", "-q", src, end)
        parent: str | None = None
        for c in revs:
            tree = git(src, "rev-parse", f"{c}^{{tree}}").strip()
            if appends:
                index = os.path.join(tmp, "index")
                env = {"GIT_INDEX_FILE": index}
                git(dst, "read-tree", tree, env=env)
                for path, snippet in appends.items():
                    old = subprocess.run(
                        ["git", "-C", dst, "cat-file", "blob", f"{c}:{path}"],
                        capture_output=True,
                    ).stdout
                    with open(snippet, "rb") as fh:
                        data = old + fh.read()
                    blob = git(dst, "hash-object", "-w", "--stdin", data=data).strip()
                    git(
                        dst,
                        "update-index",
                        "--add",
                        "--cacheinfo",
                        f"100644,{blob},{path}",
                        env=env,
                    )
                tree = git(dst, "write-tree", env=env).strip()
            fields = git(src, "log", "-1", "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI", c)
            an, ae, ad, cn, ce, cd = fields.rstrip("\n").split("\x00")
            message = git(src, "log", "-1", "--format=%B", c).strip()
            parents = git(src, "rev-list", "--parents", "-n", "1", c).split()[1:]
            if len(parents) > 1:
                merged = git(src, "log", "--no-merges", "--format=%B%x00", f"{parents[0]}..{c}")
                bodies = [m.strip() for m in merged.split("\x00") if m.strip()]
                message += "".join(f"\n\n{b}" for b in bodies)
            message += f"\n\nOriginal-commit: {c}\n"
            env = {
                "GIT_AUTHOR_NAME": an,
                "GIT_AUTHOR_EMAIL": ae,
                "GIT_AUTHOR_DATE": ad,
                "GIT_COMMITTER_NAME": cn,
                "GIT_COMMITTER_EMAIL": ce,
                "GIT_COMMITTER_DATE": cd,
            }
            args = ["commit-tree", tree, *(["-p", parent] if parent else [])]
            parent = git(dst, *args, data=message.encode(), env=env).strip()
        git(dst, "update-ref", "refs/heads/main", parent or "")
        git(dst, "bundle", "create", os.path.abspath(ns.out), "HEAD", "main")


if __name__ == "__main__":
    main()
