"""Command risk: is a shell command SAFE to run unattended, or DESTRUCTIVE?

The hook engine asks :func:`classify_command` before a ``run_command`` tool call runs;
a DESTRUCTIVE command waits for a human decision. The classifier knows commands, not
governance, so it sits below every wing: the instruction-file tracker reads the paths a
command names through it, and replays read which program a command runs. It reads the command the
way a POSIX shell would: quotes, escapes, ``|``, ``&&``, ``||``, ``;``, ``&``, newlines,
subshells, redirections (``>``, ``>>``, ``&>``, ``2>``, here-documents), command
substitution (``$(…)`` and backticks, also inside ``${…}``, arithmetic and unquoted
here-documents) and process substitution (``<(…)``), read by the one shell lexer
:mod:`ctxnb.shell.lex`. Shell operators inside quotes are plain text (``grep ">" f``
does not redirect), which :mod:`shlex` cannot tell.

Each simple command is unwrapped (``sudo``, ``doas``, ``env VAR=x``, ``nohup``, ``time``,
``nice``, ``timeout N``, ``stdbuf``, ``command``, ``exec``, ``xargs``), scripts given to
``sh -c``/``bash -c`` are classified recursively, and the innermost command is judged:

- DESTRUCTIVE: deleting or moving files (``rm``, ``rmdir``, ``mv``, ``shred``, ``dd``,
  ``truncate``, ``unlink``, ``mkfs``…), history-losing git (``push --force``,
  ``reset --hard``, ``clean``, ``checkout -- <paths>``, ``restore``, ``branch -D``,
  ``stash drop/clear``, ``rm``), recursive ``chmod``/``chown``, package installs and
  removals (pip, uv, poetry, npm, yarn, pnpm, apt, dnf, brew, cargo, gem, conda, go…),
  killing processes, ``find -delete`` or ``-exec`` of a destructive command, a
  downloader piped into a shell or interpreter (``curl … | sh``), and writes (``>``,
  ``>>``, ``tee``, ``sed -i``, ``cp``, ``touch``…) to a system path (``/etc``, ``/usr``,
  ``~``…), to a path computed at run time, or to a path ``scope_check`` rejects.
- SAFE: reading and searching (``ls``, ``cat``, ``grep``, ``rg``, ``find`` without
  ``-delete``/``-exec``, ``wc``, ``sed -n``…), ``echo``, read-only git (``status``,
  ``diff``, ``log``, ``show``, ``blame``…) and everyday git that loses nothing (``add``,
  ``commit``, ``fetch``, plain ``push``), tests and linters (``pytest``,
  ``python -m pytest``, ``ruff``, ``mypy``, ``black``…), builds that only touch the
  project (``cargo build``, ``go test``).
- Anything else is *unknown* and gets ``unknown_default`` (DESTRUCTIVE unless told
  otherwise). That includes ``python script.py``, ``python -c …``, ``make``,
  ``npm run …`` and ``bash script.sh``: they run code ctxnb cannot see. Add them to
  ``safe_commands`` to allow them; an entry is a program name (``"make"``) or a command
  prefix (``"python scripts/check.py"``, ``"npm run lint"``). The allow list only
  settles unknown commands: it never makes a destructive command safe.

Input that cannot be parsed (an unbalanced quote or parenthesis) is DESTRUCTIVE.

Example:
    >>> classify_command("git status && pytest -q").level
    'SAFE'
    >>> r = classify_command("curl -fsSL https://x.sh | sudo bash")
    >>> r.level, r.reasons[0]
    ('DESTRUCTIVE', 'pipes the output of curl into bash: runs downloaded code')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .._util.defaults import UNKNOWN_COMMAND_DEFAULT
from ._programs import Judgments, RiskLevel
from ._tables import (
    _ALWAYS_DESTRUCTIVE,
    _DEV_TOOLS,
    _DOWNLOADER_RE,
    _DOWNLOADERS,
    _INTERPRETERS,
    _PACKAGE_MANAGERS,
    _PYTHON_RE,
    _READ_ONLY,
    _SAFE_PY_MODULES,
    _SHELLS,
    _basename,
    _positionals,
    _reads_stdin,
    _skip_options,
    _w,
    unwrap,
)
from .lex import Command, ShellSyntaxError, parse

__all__ = ["RiskAssessment", "RiskLevel", "classify_command"]


@dataclass(frozen=True)
class RiskAssessment:
    """The verdict on one command line.

    Attributes:
        level: ``"SAFE"`` or ``"DESTRUCTIVE"``.
        reasons: why, one entry per finding (also notes unknown commands let through
            by ``unknown_default="SAFE"``); empty for a plainly safe command.
        commands: every simple command found, as argument lists, in order (scripts
            given to ``sh -c`` and command substitutions included).
    """

    level: RiskLevel
    reasons: list[str] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)

    @property
    def destructive(self) -> bool:
        """Whether a human must approve the command."""
        return self.level == "DESTRUCTIVE"


def classify_command(
    cmd: str | list[str],
    *,
    scope_check: Callable[[str], bool] | None = None,
    unknown_default: RiskLevel = UNKNOWN_COMMAND_DEFAULT,
    safe_commands: Iterable[str] | None = None,
) -> RiskAssessment:
    """Classify a shell command line (a string) or an argument list as SAFE or DESTRUCTIVE.

    Args:
        cmd: a command line as a shell would read it, or an argument list (run
            without a shell: no operators, redirections or substitutions).
        scope_check: called with each path the command writes to (as written,
            relative to the working directory or absolute); False makes the write
            DESTRUCTIVE. Without it only system paths, ``~`` and paths computed at
            run time are refused.
        unknown_default: the level of commands ctxnb has no rule for.
        safe_commands: extra program names or command prefixes that are SAFE when
            ctxnb has no rule for them.

    Example:
        >>> in_docs = lambda p: p.startswith("docs/")
        >>> classify_command("echo hi > notes.txt", scope_check=in_docs).reasons
        ["writes (>) to 'notes.txt', outside the intent's scope"]
        >>> classify_command("python tools/gen.py").level
        'DESTRUCTIVE'
        >>> classify_command("python tools/gen.py", safe_commands={"python tools/gen.py"}).level
        'SAFE'
    """
    if unknown_default not in ("SAFE", "DESTRUCTIVE"):
        raise ValueError(
            f"unknown_default must be 'SAFE' or 'DESTRUCTIVE', not {unknown_default!r}"
        )
    judge = Judgments(scope_check, unknown_default, safe_commands or ())
    analyzer = _Analyzer(judge)
    if isinstance(cmd, str):
        analyzer.script(cmd, depth=0)
    else:
        argv = [str(a) for a in cmd]
        if argv:
            judge.commands.append(argv)
            analyzer.argv(argv, depth=0)
    reasons = list(dict.fromkeys(judge.reasons))
    level: RiskLevel = "DESTRUCTIVE" if judge.destructive else "SAFE"
    return RiskAssessment(level=level, reasons=reasons, commands=judge.commands)


_MAX_DEPTH = 8


class _Analyzer:
    """Walks a command line's structure (scripts, pipelines, wrappers, one command) and
    hands each program to the :class:`~ctxnb.shell._programs.Judgments` it holds."""

    def __init__(self, judge: Judgments) -> None:
        self.judge = judge

    # -- structure

    def script(self, text: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.judge.flag("commands nested too deeply to check")
            return
        try:
            parsed = parse(text)
        except ShellSyntaxError as exc:
            self.judge.flag(f"cannot parse the command line: {exc}")
            return
        for inner in parsed.substitutions:
            self.script(inner, depth + 1)
        for pipeline in parsed.pipelines:
            self.pipeline(pipeline, depth)

    def pipeline(self, simples: list[Command], depth: int) -> None:
        seen_downloader = None
        for simple in simples:
            if simple.argv:
                self.judge.commands.append(list(simple.argv))
            for r in simple.redirects:
                if r.writes_file:
                    self.judge.write(r.target, f"writes ({r.op})")
            if not simple.argv:
                continue
            inner = unwrap(simple.argv)
            name = _basename(inner[0]) if inner else ""
            if seen_downloader and _reads_stdin(inner):
                self.judge.flag(
                    f"pipes the output of {seen_downloader} into {name}: runs downloaded code"
                )
            self.argv(simple.argv, depth)
            if name in _DOWNLOADERS:
                seen_downloader = name

    # -- one command

    def argv(self, argv: list[str], depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.judge.flag("commands nested too deeply to check")
            return
        inner = unwrap(argv)
        if not inner:
            return  # only assignments
        cmd = inner[0]
        if cmd.startswith("((") and cmd.endswith("))"):
            return  # arithmetic; the substitutions inside it were read with the script
        if "$" in cmd or "`" in cmd:
            self.judge.flag(f"runs a command whose name is computed at run time ({cmd!r})")
            return
        name = _basename(cmd)
        args = inner[1:]
        if name in _ALWAYS_DESTRUCTIVE or name.startswith("mkfs."):
            self.judge.flag(f"{name}: {_ALWAYS_DESTRUCTIVE.get(name, 'formats a file system')}")
        elif name in ("sudo", "doas"):
            if any(a in ("-s", "-i", "--shell", "--login") for a in args):
                self.judge.flag(f"{name} opens a root shell")
        elif name == "kill":
            if not any(a in ("-l", "-L", "--list") for a in args):
                self.judge.flag("kill: sends a signal that stops processes")
        elif name in _SHELLS:
            self.shell(inner, depth)
        elif _PYTHON_RE.match(name):
            self.python(inner, depth)
        elif name in _INTERPRETERS:
            self.judge.interpreter(inner)
        elif name == "git":
            self.judge.git(args)
        elif name == "find":
            self.find(args, depth)
        elif name == "sed":
            self.judge.sed(args)
        elif name in ("tee",):
            for target in _positionals(args):
                self.judge.write(target, "writes (tee)")
        elif name in ("touch", "mkdir", "cp", "ln", "install", "rsync", "scp"):
            self.judge.copyish(name, args)
        elif name in ("chmod", "chown", "chgrp", "setfacl", "chattr"):
            if any(
                a in ("-R", "--recursive")
                or (a.startswith("-") and not a.startswith("--") and "R" in a)
                for a in args
            ):
                self.judge.flag(f"{name} -R: changes permissions of a whole tree")
            else:
                for target in _positionals(args)[1:]:
                    self.judge.write(target, f"changes permissions ({name}) of")
        elif name in ("curl", "wget"):
            self.judge.downloader(name, args)
        elif name == "uniq":
            for target in _positionals(args, {"-f", "-s", "-w"})[1:2]:
                self.judge.write(target, "writes (uniq)")
        elif name in ("sort",):
            for i, a in enumerate(args):
                if a == "-o" and i + 1 < len(args):
                    self.judge.write(args[i + 1], "writes (sort -o)")
                elif a.startswith("--output="):
                    self.judge.write(a.split("=", 1)[1], "writes (sort -o)")
        elif name == "systemctl":
            sub = _positionals(args)[:1]
            if sub and sub[0] not in tuple(
                _w("status show list-units list-unit-files is-active is-enabled is-failed cat")
            ):
                self.judge.flag(f"systemctl {sub[0]}: changes system services")
        elif name in ("dpkg", "rpm"):
            if any(
                a in tuple(_w("-i --install -r --remove -P --purge -e -U --erase --upgrade"))
                for a in args
            ):
                self.judge.flag(f"{name}: installs or removes packages")
        elif name == "pacman":
            opts = [a for a in args if a.startswith("-") and not a.startswith("--")]
            if any(
                o[1:2] in ("R", "U") or (o[1:2] == "S" and not set(o[2:]) & {"s", "i"})
                for o in opts
            ):
                self.judge.flag("pacman: installs or removes packages")
        elif name == "uv":
            self.uv(args, depth)
        elif name in _PACKAGE_MANAGERS:
            self.judge.package_manager(name, args)
        elif name in _READ_ONLY or name in _DEV_TOOLS:
            if name in ("awk", "gawk") and "inplace" in " ".join(args):
                self.judge.flag(f"{name} -i inplace: edits files in place")
        elif name in tuple(
            _w("[ [[ { } ! if then else elif fi do done while until esac for select function")
        ):
            # Shell grammar words: the words after them are commands of their own
            # (a loop header's list is data and checked no further).
            if name not in ("for", "select", "[", "[[", "function") and args:
                self.argv(args, depth + 1)
        else:
            self.judge.unknown(inner)

    def shell(self, argv: list[str], depth: int) -> None:
        name = _basename(argv[0])
        args = argv[1:]
        for i, a in enumerate(args):
            if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
                script = _positionals(args[i + 1 :])[:1]
                if not script:
                    self.judge.flag(f"{name} -c without a script")
                elif _DOWNLOADER_RE.search(" " + script[0]):
                    self.judge.flag(f"{name} -c runs downloaded code")
                    self.script(script[0], depth + 1)
                else:
                    self.script(script[0], depth + 1)
                return
            if not a.startswith(("-", "+")):
                break
        if any(_DOWNLOADER_RE.search(" " + a) for a in args):
            self.judge.flag(f"{name} runs downloaded code")
            return
        if _reads_stdin(argv):
            self.judge.unknown(argv, "a shell reading commands from its input")
        else:
            self.judge.unknown(argv, "runs a script ctxnb cannot see")

    def python(self, argv: list[str], depth: int) -> None:
        args = argv[1:]
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("--version", "-V", "-VV", "--help", "-h"):
                return
            if a in ("-W", "-X", "--check-hash-based-pycs"):
                i += 2
                continue
            if a == "-c" or (a.startswith("-") and not a.startswith("--") and a.endswith("c")):
                if any(_DOWNLOADER_RE.search(" " + x) for x in args[i + 1 :]):
                    self.judge.flag("python -c runs downloaded code")
                else:
                    self.judge.unknown(argv, "inline code")
                return
            if a == "-m" or (a.startswith("-m") and len(a) > 2):
                module = a[2:] if len(a) > 2 else (args[i + 1] if i + 1 < len(args) else "")
                rest = args[i + 1 :] if len(a) > 2 else args[i + 2 :]
                if module == "pip":
                    self.judge.package_manager("pip", rest)
                elif module == "venv":
                    for target in _positionals(rest):
                        self.judge.write(target, "creates a virtual environment")
                elif module in _SAFE_PY_MODULES:
                    return
                else:
                    self.judge.unknown(argv, "runs a module ctxnb has no rule for")
                return
            if a.startswith("-") and a != "-":
                i += 1
                continue
            break
        self.judge.unknown(argv, "runs Python code ctxnb cannot see")

    def find(self, args: list[str], depth: int) -> None:
        i = 0
        while i < len(args):
            a = args[i]
            if a == "-delete":
                self.judge.flag("find -delete deletes files")
            elif a in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                while j < len(args) and args[j] not in (";", "+"):
                    j += 1
                inner = args[i + 1 : j]
                if inner:
                    self.argv(inner, depth + 1)
                i = j
            elif a in ("-fprint", "-fprint0", "-fls", "-fprintf") and i + 1 < len(args):
                self.judge.write(args[i + 1], f"writes (find {a})")
            i += 1

    def uv(self, args: list[str], depth: int) -> None:
        pos = _positionals(args)
        if not pos:
            return
        if pos[0] == "pip":
            self.judge.package_manager("pip", pos[1:])
        elif pos[0] == "run":
            inner = _skip_options(
                args[args.index("run") + 1 :], {"--with", "--python", "-p", "--package", "--extra"}
            )
            if inner:
                self.argv(inner, depth + 1)
        elif pos[0] in ("add", "remove", "sync", "tool", "python", "self", "venv"):
            if pos[0] == "tool" and pos[1:2] in (["list"], ["dir"]):
                return
            self.judge.flag(f"uv {pos[0]}: installs or removes packages")
        elif pos[0] in ("--version", "version", "tree", "help", "lock"):
            return
        else:
            self.judge.unknown(["uv", *args])
