"""What one program does to files, judged: the rules of the command-risk classifier.

What :mod:`ctxnb.shell.risk`'s analyzer holds and hands each program to: it keeps the
verdict (``flag``, the unknown-command rule with the allow list) and judges one
program's arguments at a time: a write to a target, git, sed, copy-like commands,
downloaders, package managers and interpreters. The analyzer in ``risk.py`` walks a
script's structure and calls these for each simple command; the tables they read are in
``_tables.py``.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Iterable
from typing import Literal

from ._tables import (
    _DOWNLOADER_RE,
    _HARMLESS_TARGETS,
    _PKG_INSTALL,
    _PKG_SAFE,
    _SYSTEM_PREFIXES,
    _TEMP_PREFIXES,
    _basename,
    _positionals,
    _w,
)

RiskLevel = Literal["SAFE", "DESTRUCTIVE"]


class Judgments:
    """The verdict being built, and the judgment of single programs."""

    def __init__(
        self,
        scope_check: Callable[[str], bool] | None,
        unknown_default: RiskLevel,
        safe_commands: Iterable[str],
    ) -> None:
        self.scope_check = scope_check
        self.unknown_default = unknown_default
        self.allow = [shlex.split(entry) for entry in safe_commands if entry.strip()]
        self.destructive = False
        self.reasons: list[str] = []
        self.commands: list[list[str]] = []

    def flag(self, reason: str) -> None:
        self.destructive = True
        self.reasons.append(reason)

    def unknown(self, argv: list[str], why: str = "") -> None:
        for entry in self.allow:
            if len(argv) >= len(entry) and argv[: len(entry)] == entry:
                return
            if (
                argv
                and entry
                and _basename(argv[0]) == entry[0]
                and argv[1 : len(entry)] == entry[1:]
            ):
                return
        text = shlex.join(argv)
        what = f"{text!r}" + (f" ({why})" if why else "")
        if self.unknown_default == "DESTRUCTIVE":
            self.flag(f"no rule for {what}; unknown commands count as DESTRUCTIVE")
        else:
            self.reasons.append(f"no rule for {what}; let through by unknown_default='SAFE'")

    # -- command families

    def write(self, target: str, what: str) -> None:
        if target in _HARMLESS_TARGETS or target.startswith("/dev/fd/"):
            return
        if any(ch in target for ch in "$`"):
            self.flag(f"{what} to {target!r}, a path computed at run time")
            return
        if target.startswith("~"):
            self.flag(f"{what} to {target!r}, in the home directory")
            return
        norm = posixpath.normpath(target)
        if norm.startswith("/"):
            if any(norm == p or norm.startswith(p + "/") for p in _TEMP_PREFIXES):
                return  # scratch space belongs to no intent; writing there loses nothing
            if norm == "/" or any(norm == p or norm.startswith(p + "/") for p in _SYSTEM_PREFIXES):
                self.flag(f"{what} to {target!r}, a system path")
                return
        elif norm == ".." or norm.startswith("../"):
            self.flag(f"{what} to {target!r}, outside the working directory")
            return
        if self.scope_check is not None and not self.scope_check(target):
            self.flag(f"{what} to {target!r}, outside the intent's scope")

    def interpreter(self, argv: list[str]) -> None:
        name = _basename(argv[0])
        if any(_DOWNLOADER_RE.search(" " + a) for a in argv[1:]):
            self.flag(f"{name} runs downloaded code")
        elif argv[1:] and argv[1] in ("--version", "-v", "-V", "--help", "-h"):
            return
        else:
            self.unknown(argv, "runs code ctxnb cannot see")

    def git(self, args: list[str]) -> None:
        args = list(args)
        while args and args[0].startswith("-"):  # global options: -C dir, -c k=v, --no-pager
            if args[0] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") and len(args) > 1:
                args = args[2:]
            else:
                args = args[1:]
        if not args:
            return
        sub, rest = args[0], args[1:]
        flags = set(rest)
        short = "".join(a[1:] for a in rest if a.startswith("-") and not a.startswith("--"))
        reason = None
        if sub == "push":
            if (
                flags & {"--force", "--force-with-lease", "--mirror", "--delete", "--prune"}
                or "f" in short
                or "d" in short
                or any(a.startswith(("--force-with-lease=", "--force-if-includes")) for a in rest)
                or any(a.startswith(("+", ":")) for a in _positionals(rest))
            ):
                reason = "git push --force/--delete rewrites or deletes remote history"
        elif sub == "reset":
            if "--hard" in flags or "--merge" in flags or "--keep" in flags:
                reason = "git reset --hard discards uncommitted changes"
        elif sub == "clean":
            if not (flags & {"-n", "--dry-run"} or "n" in short):
                reason = "git clean deletes untracked files"
        elif sub == "checkout":
            if (
                "--" in rest
                or "." in rest
                or flags & {"-f", "--force", "--ours", "--theirs"}
                or "f" in short
            ):
                reason = "git checkout -- <paths> discards uncommitted changes"
        elif sub == "restore":
            staged_only = ("--staged" in flags or "S" in short) and not (
                "--worktree" in flags or "W" in short
            )
            if not staged_only:
                reason = "git restore discards uncommitted changes"
        elif sub == "switch":
            if flags & {"--discard-changes", "-f", "--force"}:
                reason = "git switch --discard-changes discards uncommitted changes"
        elif sub == "branch":
            force = "--force" in flags or "f" in short
            if (
                "D" in short
                or (("d" in short or "--delete" in flags) and force)
                or "M" in short
                or "C" in short
            ):
                reason = "git branch -D deletes a branch that may not be merged"
        elif sub == "stash":
            if rest[:1] and rest[0] in ("drop", "clear"):
                reason = f"git stash {rest[0]} can lose stashed changes"
        elif sub == "rm":
            if not (flags & {"--cached", "-n", "--dry-run"}):
                reason = "git rm deletes files"
        elif sub == "mv":
            reason = "git mv moves files"
        elif sub in ("filter-branch", "filter-repo", "replace"):
            reason = f"git {sub} rewrites history"
        elif sub == "reflog" and rest[:1] in (["expire"], ["delete"]):
            reason = "git reflog expire/delete drops recovery points"
        elif sub == "gc" and any(a.startswith("--prune") for a in rest):
            reason = "git gc --prune deletes unreachable objects"
        elif sub == "update-ref" and "-d" in flags:
            reason = "git update-ref -d deletes a ref"
        elif sub == "worktree" and rest[:1] == ["remove"]:
            reason = "git worktree remove deletes a working tree"
        elif sub == "tag" and flags & {"-d", "--delete", "-f", "--force"}:
            reason = "git tag -d/-f deletes or moves a tag"
        elif sub in tuple(
            _w("""status diff log show blame annotate shortlog describe rev-parse rev-list ls-files
    ls-tree ls-remote cat-file grep reflog remote branch tag fetch add commit stash push
    pull switch merge-base name-rev show-ref for-each-ref whatchanged help version
    count-objects check-ignore var notes config init clone difftool range-diff cherry
    format-patch""")
        ):
            if sub == "config" and not (
                flags & {"--get", "--list", "-l", "--get-all", "--get-regexp", "--show-origin"}
            ):
                self.unknown(["git", *args], "changes git configuration")
            return
        else:
            self.unknown(["git", *args])
            return
        if reason:
            self.flag(reason)

    def sed(self, args: list[str]) -> None:
        in_place = False
        script_given = False
        positionals: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-e", "--expression", "-f", "--file"):
                script_given = True
                i += 2
                continue
            if a.startswith(("--expression=", "--file=")):
                script_given = True
            elif a.startswith("--in-place"):
                in_place = True
            elif a.startswith("-") and not a.startswith("--") and a != "-":
                body = a[1:]
                if "i" in body.split("e", 1)[0].split("f", 1)[0]:
                    in_place = True
                if body.endswith(("e", "f")):
                    script_given = True
                    i += 2
                    continue
            elif not a.startswith("-"):
                positionals.append(a)
            i += 1
        if not in_place:
            return
        files = positionals if script_given else positionals[1:]
        for target in files:
            self.write(target, "edits in place (sed -i)")

    def copyish(self, name: str, args: list[str]) -> None:
        if name == "rsync" and any(
            a.startswith("--delete") or a == "--remove-source-files" for a in args
        ):
            self.flag("rsync --delete deletes files at the destination")
        targets: list[str] = []
        for i, a in enumerate(args):
            if a in ("-t", "--target-directory") and i + 1 < len(args):
                targets.append(args[i + 1])
            elif a.startswith("--target-directory="):
                targets.append(a.split("=", 1)[1])
        pos = _positionals(
            args, {"-t", "--target-directory", "-m", "--mode", "-o", "-g", "-S", "--suffix", "-e"}
        )
        if name in ("touch", "mkdir"):
            targets.extend(pos)
        elif not targets and pos:
            targets.append(pos[-1])
        for target in targets:
            if ":" in target and name in ("rsync", "scp") and not target.startswith("/"):
                self.flag(f"{name}: copies to another machine ({target!r})")
            else:
                self.write(target, f"writes ({name})")

    def downloader(self, name: str, args: list[str]) -> None:
        out_flags = {"curl": ("-o", "--output"), "wget": ("-O", "--output-document")}[name]
        for i, a in enumerate(args):
            if a in out_flags and i + 1 < len(args):
                self.write(args[i + 1], f"downloads ({name})")
            elif a.startswith(out_flags[1] + "="):
                self.write(a.split("=", 1)[1], f"downloads ({name})")
            elif a.startswith(out_flags[0]) and len(a) > 2 and not a.startswith("--"):
                self.write(a[2:], f"downloads ({name})")
            elif name == "wget" and a in ("-P", "--directory-prefix") and i + 1 < len(args):
                self.write(args[i + 1], "downloads (wget)")

    def package_manager(self, name: str, args: list[str]) -> None:
        pos = _positionals(args)
        if name == "yarn" and not pos:
            self.flag("yarn: installs packages")
            return
        sub = pos[0] if pos else (args[0] if args else "")
        if sub == "env" and name in ("conda", "mamba", "micromamba") and len(pos) > 1:
            sub = pos[1]  # "conda env remove": the verb is the second word
        if name in ("pip", "pip3") or name.startswith("pip"):
            if sub in ("install", "uninstall", "download", "wheel"):
                self.flag(f"{name} {sub}: installs or removes packages")
            elif sub in _PKG_SAFE or sub in ("", "cache"):
                return
            else:
                self.unknown([name, *args])
            return
        if name == "pipx" and sub == "run":
            self.flag("pipx run: downloads and runs a package")
            return
        if name in ("npm", "pnpm", "yarn", "bun") and sub in ("run", "run-script", "exec", "x"):
            self.unknown([name, *args], "runs a project script")
            return
        if name == "brew" and sub in tuple(
            _w("list ls info search config doctor deps outdated --version")
        ):
            return
        if sub in _PKG_INSTALL or (name == "brew" and sub not in _PKG_SAFE):
            self.flag(f"{name} {sub}: installs or removes packages")
        elif sub in _PKG_SAFE:
            return
        else:
            self.unknown([name, *args])
