"""Read and edit recognition for shell commands that agents run.

Agents that act through a shell read files with ``cat``, ``sed -n``, ``nl -ba | sed -n``,
``head``, ``grep -n`` and change them with heredocs, ``sed -i``, ``echo >`` and small
Python scripts. This module turns one command (and the output it produced) into the
:class:`~ctxnb.replay.model.FileTouch` records of the neutral format. It is deliberately
a recogniser, not a shell: anything it does not know stays a plain ``bash`` step.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from ..shell._tables import unwrap
from ..shell.lex import Command, ShellSyntaxError, parse
from ._sed import SedUnsupported, apply_sed
from .model import FileTouch

__all__ = ["FileMemory", "ShellParse", "parse_command"]

# Commands whose stdout is empty (or irrelevant), so they do not compete with a read
# for the step's observation.
_SILENT = frozenset(
    {"cd", "export", "set", "unset", "mkdir", "touch", "rm", "cp", "mv", "true", "source", "."}
)
_PYTHON = re.compile(r"^(?:/\S*/)?python(?:\d+(?:\.\d+)?)?$")


class FileMemory:
    """Whole-file contents seen so far in a run, so later edits can be applied to them.

    Keys are paths as the converter normalised them; an edit whose result cannot be
    computed forgets the file rather than keep a stale copy.
    """

    def __init__(self) -> None:
        self._files: dict[str, str] = {}

    def get(self, path: str) -> str | None:
        return self._files.get(path)

    def set(self, path: str, content: str) -> None:
        self._files[path] = content

    def forget(self, path: str) -> None:
        self._files.pop(path, None)


@dataclass
class ShellParse:
    """What :func:`parse_command` recognised in one command.

    Attributes:
        files: file touches, in command order.
        notes: remarks for the step's note (sed scripts, skipped content, ...).
        ok: false when the command could not be tokenised at all.
    """

    files: list[FileTouch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ok: bool = True


@dataclass
class _Redirect:
    target: str
    append: bool


@dataclass
class _Cmd:
    argv: list[str]
    heredoc: str | None
    redirects: list[_Redirect]


def _command(cmd: Command) -> _Cmd:
    """The parts of a simple command the recogniser reads: argv, stdin text, stdout files."""
    redirects = [
        _Redirect(r.target, r.op.endswith(">>"))
        for r in cmd.redirects
        if r.writes_file and r.op != "<>" and r.fd in ("", "1") and r.target != "/dev/null"
    ]
    # Leading VAR=value assignments and wrappers (sudo, env, timeout 5 …) do not change
    # what the command is.
    return _Cmd(unwrap(list(cmd.argv)), cmd.stdin_text, redirects)


# --------------------------------------------------------------------------- recognition


@dataclass
class _Read:
    touch: FileTouch
    strip_numbers: bool = False
    full: bool = False  # the output is the whole file
    filtered: bool = False  # piped through a filter we do not model: output is not the file


def _join(cwd: str | None, path: str) -> str:
    if cwd and not path.startswith("/"):
        return posixpath.normpath(posixpath.join(cwd, path))
    return path


def _line_range(script: str) -> tuple[int, int | None] | None:
    m = re.fullmatch(r"\s*(\d+)\s*(?:,\s*(\d+|\$)\s*)?p\s*;?\s*", script)
    if not m:
        return None
    start = int(m.group(1))
    end = m.group(2)
    if end is None:
        return start, start
    return start, None if end == "$" else int(end)


def _head_count(args: list[str]) -> tuple[int | None, list[str]]:
    count: int | None = 10
    files: list[str] = []
    k = 0
    while k < len(args):
        a = args[k]
        if a in ("-n", "--lines") and k + 1 < len(args):
            count = _int(args[k + 1].lstrip("+"))
            k += 2
            continue
        if a.startswith("--lines="):
            count = _int(a.split("=", 1)[1])
        elif re.fullmatch(r"-n-?\d+", a):
            count = _int(a[2:])
        elif re.fullmatch(r"-\d+", a):
            count = int(a[1:])
        elif a.startswith("-") and a != "-":
            pass
        else:
            files.append(a)
        k += 1
    return count, files


def _int(s: str) -> int | None:
    try:
        return int(s)
    except ValueError:
        return None


_GREP_ARG_OPTS = frozenset(
    {"-e", "-f", "-A", "-B", "-C", "-m", "--include", "--exclude", "--exclude-dir", "-d"}
)


def _grep_files(args: list[str]) -> tuple[list[str], bool] | None:
    """Files a grep reads and whether it recurses; None when it prints no lines."""
    pattern_given = False
    files: list[str] = []
    recursive = False
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            files.extend(args[k + 1 :])
            break
        if a in _GREP_ARG_OPTS:
            pattern_given = pattern_given or a in ("-e", "-f")
            k += 2
            continue
        if a.startswith("--"):
            if a in ("--recursive", "--dereference-recursive"):
                recursive = True
            if a in ("--count", "--files-with-matches", "--files-without-match", "--quiet"):
                return None
            k += 1
            continue
        if a.startswith("-") and len(a) > 1:
            flags = a[1:]
            if any(f in flags for f in "rR"):
                recursive = True
            if any(f in flags for f in "clLq"):
                return None
            if flags[-1] in "efABCm" and not re.search(r"\d", flags):
                pattern_given = pattern_given or flags[-1] in "ef"
                k += 2
                continue
            k += 1
            continue
        if not pattern_given:
            pattern_given = True
        else:
            files.append(a)
        k += 1
    return files, recursive


def _strip_numbers(text: str) -> str | None:
    out = []
    for line in text.split("\n"):
        m = re.match(r"^ *\d+\t(.*)$", line) or re.match(r"^ *\d+→(.*)$", line)
        if m:
            out.append(m.group(1))
        elif not line.strip():
            out.append("")
        else:
            return None
    return "\n".join(out)


def _python_targets(code: str) -> tuple[list[str], set[str]]:
    """Paths a Python snippet opens for writing, and paths it opens for reading."""
    assigned = {
        m.group(1): m.group(3)
        for m in re.finditer(r"\b([A-Za-z_]\w*)\s*=\s*(['\"])([^'\"\n]+)\2", code)
    }

    def resolve(expr: str) -> str | None:
        m = re.fullmatch(r"\s*(['\"])([^'\"]+)\1\s*", expr)
        if m:
            return m.group(2)
        name = expr.strip()
        return assigned.get(name)

    writes: list[str] = []
    reads: set[str] = set()
    for m in re.finditer(
        r"\bopen\(\s*([^,()]+?)\s*(?:,\s*(?:mode\s*=\s*)?(['\"])(\w*)\2)?\s*[,)]", code
    ):
        path = resolve(m.group(1))
        if not path:
            continue
        mode = m.group(3) or "r"
        if any(ch in mode for ch in "wax"):
            if path not in writes:
                writes.append(path)
        else:
            reads.add(path)
    for m in re.finditer(r"Path\(\s*([^()]+?)\s*\)\.(write_text|read_text)\(", code):
        path = resolve(m.group(1))
        if path and m.group(2) == "write_text" and path not in writes:
            writes.append(path)
        elif path:
            reads.add(path)
    return writes, reads


# --------------------------------------------------------------------------- sed -i


def _sed_inplace(
    args: list[str], cwd: str | None, memory: FileMemory, notes: list[str]
) -> list[FileTouch]:
    scripts: list[str] = []
    files: list[str] = []
    extended = False
    k = 0
    while k < len(args):
        a = args[k]
        if a in ("-e", "--expression") and k + 1 < len(args):
            scripts.append(args[k + 1])
            k += 2
            continue
        if a in ("-E", "-r", "--regexp-extended"):
            extended = True
        elif a.startswith(("-i", "--in-place")) or a in ("-n", "-s", "-u", "-z"):
            pass
        elif a.startswith("-") and len(a) > 1:
            extended = extended or "E" in a or "r" in a
        elif not scripts:
            scripts.append(a)
        else:
            files.append(a)
        k += 1
    script = "\n".join(scripts)
    notes.append(f"sed -i script: {script}")
    touches = []
    for f in files:
        path = _join(cwd, f)
        before = memory.get(path)
        after: str | None = None
        if before is not None:
            try:
                after = apply_sed(script, before, extended)
            except (SedUnsupported, re.error, IndexError, ValueError):
                after = None
        if after is None:
            memory.forget(path)
        else:
            memory.set(path, after)
        touches.append(FileTouch(path=path, op="edit", content=after))
    return touches


# --------------------------------------------------------------------------- entry point


def parse_command(
    command: str,
    output: str | None,
    memory: FileMemory,
    *,
    output_complete: bool = True,
    cwd: str | None = None,
) -> ShellParse:
    """Recognise the file reads and edits of one shell command.

    Args:
        command: the command line (may hold heredocs and several commands).
        output: what the command printed, used as the content of a lone read.
        memory: whole-file contents known so far; updated by full reads and edits.
        output_complete: false when the agent truncated the output, so it is not
            the file content.
        cwd: a working directory to join relative paths with (``cd`` in the command
            changes it for the commands after it).

    Returns:
        The touches found, notes, and whether the command could be tokenised.

    Example:
        >>> r = parse_command("cd src && sed -n '2,3p' a.py", "b\\nc\\n", FileMemory())
        >>> [(f.path, f.op, f.start_line, f.end_line, f.content) for f in r.files]
        [('src/a.py', 'read', 2, 3, 'b\\nc\\n')]
    """
    result = ShellParse()
    try:
        pipelines = [[_command(c) for c in p] for p in parse(command).pipelines]
    except ShellSyntaxError as exc:
        result.ok = False
        result.notes.append(f"could not tokenise the shell command: {exc}")
        return result

    reads: list[_Read] = []
    loud = 0  # pipelines whose stdout reaches the observation
    for cmds in pipelines:
        cmds = [c for c in cmds if c.argv or c.heredoc is not None]
        if not cmds:
            continue
        first = cmds[0]
        name = posixpath.basename(first.argv[0]) if first.argv else ""
        args = first.argv[1:]
        last = cmds[-1]
        stdout_redirected = bool(last.redirects)
        if name == "cd" and len(cmds) == 1:
            if args and args[0] not in ("-",):
                cwd = _join(cwd, args[0])
            continue
        read = _recognise_read(name, args, cmds, cwd)
        if read is not None:
            reads.append(read)
            result.files.append(read.touch)
            if not stdout_redirected:
                loud += 1
        else:
            result.files.extend(_recognise_writes(name, args, first, cwd, memory, result.notes))
            if name not in _SILENT and not stdout_redirected:
                loud += 1
        # Output redirections of the last stage write files (heredoc writes included).
        for red in last.redirects:
            path = _join(cwd, red.target)
            if name == "cat" and not args and first.heredoc is not None and len(cmds) == 1:
                content = first.heredoc
            elif name == "echo" and len(cmds) == 1 and not any(a.startswith("-") for a in args):
                content = " ".join(args) + "\n"
            else:
                content = None
            if red.append:
                before = memory.get(path)
                after = before + content if before is not None and content is not None else None
                result.files.append(
                    FileTouch(path=path, op="edit", content=after, new_text=content)
                )
                if after is None:
                    memory.forget(path)
                else:
                    memory.set(path, after)
            else:
                result.files.append(FileTouch(path=path, op="write", content=content))
                if content is None:
                    memory.forget(path)
                else:
                    memory.set(path, content)
        for cmd in cmds[1:]:
            if cmd.argv and posixpath.basename(cmd.argv[0]) == "tee":
                for t in cmd.argv[1:]:
                    if not t.startswith("-"):
                        result.files.append(FileTouch(path=_join(cwd, t), op="write"))
                        memory.forget(_join(cwd, t))

    lone = len(reads) == 1 and loud == 1 and output is not None and output_complete
    if reads and not lone:
        if output is not None and not output_complete:
            result.notes.append("output truncated; read content unknown")
        elif len(reads) > 1 or loud > 1:
            result.notes.append("several commands printed; read content not split")
    for r in reads:
        if lone and output is not None and not r.filtered:
            text = _strip_numbers(output) if r.strip_numbers else output
            r.touch.content = text
            if r.full and text is not None:
                memory.set(r.touch.path, text)
                r.touch.start_line = 1
                r.touch.end_line = text.count("\n") + (0 if text.endswith("\n") else 1)
            elif (
                text is not None
                and r.touch.start_line is not None
                and r.touch.end_line is not None
                and text
            ):
                # A range past the end of the file shows fewer lines than asked for.
                shown = text.count("\n") + (0 if text.endswith("\n") else 1)
                r.touch.end_line = min(r.touch.end_line, r.touch.start_line + shown - 1)
    return result


def _recognise_read(name: str, args: list[str], cmds: list[_Cmd], cwd: str | None) -> _Read | None:
    rest = cmds[1:]
    filt = None
    if rest:
        # Only a range filter after the reader keeps the output a contiguous file range.
        if len(rest) != 1 or not rest[0].argv:
            return _partial_read(name, args, cwd)
        fname = posixpath.basename(rest[0].argv[0])
        fargs = rest[0].argv[1:]
        if fname == "sed" and len(fargs) == 2 and fargs[0] == "-n":
            filt = _line_range(fargs[1])
        elif fname == "head":
            count, files = _head_count(fargs)
            filt = (1, count) if count and not files else None
        if filt is None:
            return _partial_read(name, args, cwd)

    if name in ("cat", "nl") and cmds[0].heredoc is None:
        numbered = name == "nl" or any(a in ("-n", "--number") for a in args)
        files = [a for a in args if not a.startswith("-") or a == "-"]
        if name == "nl":
            files = [a for a in files if not re.fullmatch(r"-\S+", a)]
        if len(files) != 1 or files[0] == "-":
            return None if not files else _partial_read(name, args, cwd)
        path = _join(cwd, files[0])
        if filt:
            return _Read(
                FileTouch(path=path, op="read", start_line=filt[0], end_line=filt[1]),
                strip_numbers=numbered,
            )
        return _Read(FileTouch(path=path, op="read"), strip_numbers=numbered, full=not numbered)
    if rest:
        return _partial_read(name, args, cwd)
    if name == "sed" and args and args[0] == "-n" and len(args) == 3:
        rng = _line_range(args[1])
        if rng:
            return _Read(
                FileTouch(path=_join(cwd, args[2]), op="read", start_line=rng[0], end_line=rng[1])
            )
        return _Read(FileTouch(path=_join(cwd, args[2]), op="read"))
    if name == "head":
        count, files = _head_count(args)
        if len(files) == 1:
            return _Read(
                FileTouch(path=_join(cwd, files[0]), op="read", start_line=1, end_line=count)
            )
    if name == "tail":
        count, files = _head_count(args)
        plus = any(a.startswith("+") for a in args) or any(
            args[i] == "-n" and i + 1 < len(args) and args[i + 1].startswith("+")
            for i in range(len(args))
        )
        if len(files) == 1:
            start = count if plus else None
            return _Read(FileTouch(path=_join(cwd, files[0]), op="read", start_line=start))
    if name in ("grep", "egrep", "fgrep"):
        g = _grep_files(args)
        if g is not None:
            files, recursive = g
            if len(files) == 1 and not recursive and not files[0].endswith("/") and files[0] != ".":
                return _Read(FileTouch(path=_join(cwd, files[0]), op="read"))
    return None


def _partial_read(name: str, args: list[str], cwd: str | None) -> _Read | None:
    """A reader piped into a filter we do not model: a read of unknown range."""
    if name in ("cat", "nl", "head", "tail"):
        files = [a for a in args if not a.startswith("-") and not a.isdigit()]
        if len(files) == 1:
            return _Read(FileTouch(path=_join(cwd, files[0]), op="read"), filtered=True)
    return None


def _recognise_writes(
    name: str,
    args: list[str],
    cmd: _Cmd,
    cwd: str | None,
    memory: FileMemory,
    notes: list[str],
) -> list[FileTouch]:
    if name == "sed" and any(a.startswith(("-i", "--in-place")) for a in args):
        return _sed_inplace(args, cwd, memory, notes)
    if _PYTHON.match(name):
        code: str | None = None
        if "-c" in args:
            idx = args.index("-c")
            code = args[idx + 1] if idx + 1 < len(args) else None
        elif cmd.heredoc is not None and (not args or args[0] == "-"):
            code = cmd.heredoc
        elif args and args[0].endswith(".py"):
            code = memory.get(_join(cwd, args[0]))
        if code:
            writes, reads = _python_targets(code)
            out = []
            for w in writes:
                path = _join(cwd, w)
                memory.forget(path)
                out.append(FileTouch(path=path, op="edit" if w in reads else "write"))
            return out
        return []
    if name == "rm":
        out = []
        for a in args:
            if not a.startswith("-"):
                path = _join(cwd, a)
                memory.forget(path)
                out.append(FileTouch(path=path, op="delete"))
        return out
    return []
