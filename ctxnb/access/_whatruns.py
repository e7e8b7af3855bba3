"""What runs on the host from a workspace, read from the files and programs that decide it.

The derivation behind :func:`ctxnb.access.protected.protected_set`, one function per
source; each adds what it finds to a :class:`Found` (workspace-relative path → why)
and names the files it read (their stat keys the hook's cache):

* :func:`claude_code`: the commands named in Claude Code's settings (``hooks``,
  ``statusLine``, the credential helpers, any ``command``) and ``.mcp.json``'s servers;
* :func:`git`: git's effective hooks directory (asked of git), the configuration files
  git read, and the programs its configuration names (filters, ``core.fsmonitor``,
  ``core.sshCommand``, ``diff.*.textconv``, ``credential.helper`` …);
* :func:`python_environments`: every Python environment inside the workspace (a
  directory with ``pyvenv.cfg`` or ``conda-meta/``, the one ctxnb runs in, ``$VIRTUAL_ENV``,
  ``$CONDA_PREFIX``) and the ``PATH`` directories that lie in it;
* :func:`ctxnb_settings`: the programs ctxnb's own settings start (``ctxnb.toml`` or
  ``[tool.ctxnb]``: each outside MCP server's ``command`` and ``args``, in its ``cwd``);
* :func:`ctxnb_source`: where the import system loads ctxnb from;
* :func:`follow`: what those files run in turn (the files a protected script names, the
  modules a protected Python script imports from beside it, what git's hooks read).

A command names a file by a word of it: a word with a ``/`` or a leading ``.``, or a
bare word naming a file that exists, resolved against the directory the command runs
in (``$CLAUDE_PROJECT_DIR``, ``${CLAUDE_PROJECT_DIR}``, ``~`` and ``$HOME`` expanded;
an unknown ``$VAR/`` prefix dropped, so the rest is protected where it would lie) and,
for a file that exists, against each directory the command names; the module of
``python -m``; and the file a task runner reads (``make`` its Makefile, ``npm run``
its ``package.json`` …). A path is protected as it is named and as its links resolve.
Nothing here runs what it finds: git is asked for its configuration
(``git config --list``, ``git rev-parse``), which runs no hook, filter or monitor.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat as stat_mod
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = [
    "Found",
    "claude_code",
    "claude_settings_files",
    "ctxnb_settings",
    "ctxnb_source",
    "follow",
    "git",
    "named_paths",
    "python_environments",
]

_MAX_CONFIG_BYTES = 4 << 20  # a settings file larger than this is not a settings file
_GIT_TIMEOUT = 20.0

# What a task runner named in a command reads as code, relative to where it runs.
_RUNNER_FILES: dict[str, tuple[str, ...]] = {
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "just": ("justfile", "Justfile", ".justfile"),
    "npm": ("package.json",),
    "pnpm": ("package.json",),
    "yarn": ("package.json",),
    "bun": ("package.json",),
    "tox": ("tox.ini",),
    "nox": ("noxfile.py",),
    "task": ("Taskfile.yml", "Taskfile.yaml"),
    "pre-commit": (".pre-commit-config.yaml",),
}

# Claude Code settings keys whose string value is a command it runs on its own.
_CLAUDE_HELPERS = ("apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "otelHeadersHelper")

# git configuration keys whose value is a command or program git runs (lower-cased).
_GIT_PROGRAMS = re.compile(
    r"core\.(fsmonitor|sshcommand|editor|pager|askpass|gitproxy)"
    r"|sequence\.editor|gpg\.(.+\.)?program|credential\.(.+\.)?helper"
    r"|filter\..+\.(clean|smudge|process)|diff\..+\.(textconv|command)|merge\..+\.driver"
    r"|(diff|merge)tool\..+\.(cmd|path)|alias\..+|pager\..+|interactive\.difffilter"
    r"|uploadpack\.packobjectshook|ssh\.variant"
)
# git configuration keys whose value is a directory git runs or copies code from.
_GIT_DIRS = re.compile(r"core\.hookspath|init\.templatedir")
_GIT_INCLUDE = re.compile(r"include\.path|includeif\..+\.path")
_VAR_PREFIX = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)/")


class Found:
    """The paths a derivation protects (workspace-relative → why) and the files it read.

    Args:
        root: the workspace root.
    """

    __slots__ = ("entries", "read", "root", "roots", "run_dirs")

    def __init__(self, root: str | os.PathLike[str]) -> None:
        given = os.path.abspath(os.fspath(root))
        self.root = os.path.realpath(given)
        self.roots = tuple(dict.fromkeys((self.root, given)))
        self.entries: dict[str, str] = {}
        self.read: set[str] = set()
        # Directories whose every file a program runs (git's hooks directory, wherever
        # it lies): their files are followed for what they name.
        self.run_dirs: dict[str, str] = {}

    def rel(self, path: str) -> str | None:
        """``path`` (absolute, normalised) relative to the root, or None when outside or
        the root itself (a workspace is never protected whole)."""
        for base in self.roots:
            if path.startswith(base + "/"):
                return path[len(base) + 1 :]
        return None

    def add(self, path: str, why: str) -> None:
        """Protect the absolute ``path`` as named, and where its links lead."""
        lexical = os.path.normpath(path)
        for candidate in dict.fromkeys((lexical, os.path.realpath(lexical))):
            rel = self.rel(candidate)
            if rel is not None:
                self.entries.setdefault(rel, why)

    def shown(self, path: str) -> str:
        """A file's name in a reason: workspace-relative when it lies inside."""
        return self.rel(os.path.normpath(path)) or path


# -- reading configuration -----------------------------------------------------------------
def _read_text(path: str) -> str | None:
    """A configuration file's text, or None when there is none. No FIFO or device is
    opened for reading (one would block the hook)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise ConfigError(
            f"{path}: cannot be read ({e.strerror}); ctxnb cannot tell what it runs, so "
            "it cannot protect it. Make the file readable or remove it."
        ) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        data = fh.read(_MAX_CONFIG_BYTES + 1)
    if len(data) > _MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {_MAX_CONFIG_BYTES} bytes; not a settings file")
    return data.decode("utf-8", "replace")


def _load_json(path: str, found: Found) -> Any:
    found.read.add(path)
    text = _read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise ConfigError(
            f"{path}: not valid JSON ({e}); ctxnb cannot tell which commands it names, so "
            "it cannot protect them. Fix the file (Claude Code cannot read it either)."
        ) from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply to read") from None


# -- words of a command ----------------------------------------------------------------------
def _words(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:  # an unclosed quote: the shell would refuse it; read it plainly
        return command.split()


def _expand(word: str, base: str, home: str | None) -> str:
    for name in ("${CLAUDE_PROJECT_DIR}", "$CLAUDE_PROJECT_DIR"):
        word = word.replace(name, base)
    if home:
        for name in ("${HOME}", "$HOME"):
            word = word.replace(name, home)
        if word == "~" or word.startswith("~/"):
            word = home + word[1:]
    # A variable ctxnb cannot know: what follows it is protected where it would lie in
    # the directory the command runs in (a hook script keeps its relative place).
    while True:
        m = _VAR_PREFIX.match(word)
        if m is None:
            break
        word = word[m.end() :]
    return word


def named_paths(command: str, base: str, *, home: str | None = None) -> list[str]:
    """The absolute paths ``command`` names, run in the directory ``base``.

    Example:
        >>> named_paths('bash "$CLAUDE_PROJECT_DIR"/.claude/hooks/fmt.sh --check', "/ws")
        ['/ws/.claude/hooks/fmt.sh']
        >>> named_paths("python3 -m tools.lint && make lint", "/ws")[:3]
        ['/ws/tools/lint.py', '/ws/tools/lint', '/ws/tools/__init__.py']
        >>> named_paths("make lint", "/ws")
        ['/ws/Makefile', '/ws/makefile', '/ws/GNUmakefile']

    A named directory is not protected whole (``ruff format src/`` names what a
    formatter writes, not what runs); a file that exists in it under a word of the
    command is (``cd tools && bash lint.sh`` protects ``tools/lint.sh``).
    """
    out: list[str] = []
    words = _words(command)
    # A directory the command names (``cd tools && bash lint.sh``) is another place a
    # relative word may lie; there, only a file that exists counts.
    places = [
        full
        for w in words
        if os.path.isdir(full := os.path.normpath(os.path.join(base, _expand(w, base, home))))
        and full != os.path.normpath(base)
    ]
    for i, raw in enumerate(words):
        if i and words[i - 1] == "-m" and re.fullmatch(r"[\w.]+", raw):
            parts = raw.split(".")
            out += [os.path.join(base, *parts) + ".py", os.path.join(base, *parts)]
            out += [os.path.join(base, *parts[:k], "__init__.py") for k in range(1, len(parts))]
            continue
        runner = _RUNNER_FILES.get(os.path.basename(raw))
        if runner:
            out += [os.path.join(base, name) for name in runner]
        for piece in dict.fromkeys((raw, raw.rpartition("=")[2])):
            word = _expand(piece, base, home)
            if not word or word.startswith("-") or "\x00" in word:
                continue
            pathlike = "/" in word or word.startswith(".")
            full = os.path.normpath(os.path.join(base, word))
            if pathlike or (os.path.lexists(full) and not os.path.isdir(full)):
                out.append(full)
            for place in places:
                there = os.path.normpath(os.path.join(place, word))
                if os.path.lexists(there) and not os.path.isdir(there):
                    out.append(there)
    return list(dict.fromkeys(out))


# -- Claude Code ---------------------------------------------------------------------------
def claude_settings_files(bases: Sequence[str], env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(settings file, directory its commands run in) for each file Claude Code may read
    in these project directories: each one's ``.claude/settings.json``,
    ``.claude/settings.local.json`` and ``.mcp.json``; the user's and the managed
    settings (run in each project directory)."""
    out: list[tuple[str, str]] = []
    for base in bases:
        for name in (".claude/settings.json", ".claude/settings.local.json", ".mcp.json"):
            out.append((os.path.join(base, name), base))
    config_dir = env.get("CLAUDE_CONFIG_DIR") or (
        os.path.join(env["HOME"], ".claude") if env.get("HOME") else None
    )
    user = [os.path.join(config_dir, "settings.json")] if config_dir else []
    for path in (*user, "/etc/claude-code/managed-settings.json"):
        out += [(path, base) for base in bases]
    return out


def _commands(data: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(where, command) for every command a Claude Code settings or ``.mcp.json`` object
    names: any ``command`` string (with its ``args``), and the helper keys."""
    if isinstance(data, dict):
        command = data.get("command")
        if isinstance(command, str):
            args = data.get("args")
            if isinstance(args, list) and all(isinstance(a, str) for a in args):
                command = " ".join([command, shlex.join(args)])
            yield where or "command", command
        for key in _CLAUDE_HELPERS:
            value = data.get(key)
            if isinstance(value, str):
                yield key, value
        for key, value in data.items():
            if isinstance(value, dict | list) and isinstance(key, str):
                # A hook group's own "hooks" list adds nothing to "hooks.PreToolUse".
                inner = where if key == "hooks" and where.startswith("hooks.") else None
                yield from _commands(value, inner or (f"{where}.{key}" if where else key))
    elif isinstance(data, list):
        for item in data:
            yield from _commands(item, where)


def claude_code(found: Found, bases: Sequence[str], env: Mapping[str, str]) -> None:
    """What Claude Code runs on the host: every command its settings and ``.mcp.json``
    name, in the directories ``bases`` (the workspace, and where Claude Code starts)."""
    home = env.get("HOME")
    loaded: dict[str, Any] = {}
    for path, base in claude_settings_files(bases, env):
        if path not in loaded:
            loaded[path] = _load_json(path, found)
        data = loaded[path]
        if data is None:
            continue
        for where, command in _commands(data):
            why = (
                f"it is named by {found.shown(path)} ({where}): Claude Code runs it on "
                "the host, outside the sandbox"
            )
            for named in named_paths(command, base, home=home):
                found.add(named, why)


# -- git -------------------------------------------------------------------------------------
def _git(args: list[str], root: str, env: Mapping[str, str]) -> str | None:
    """git's answer, or None when there is no git to ask (then git runs nothing here)."""
    import subprocess  # only when the set is derived: the cached hook never pays for it

    try:
        proc = subprocess.run(
            ["git", "-C", root, *args],
            env={**env, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(
            f"git {args[0]} in {root} failed ({e}); fix git or its configuration"
        ) from None
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "surrogateescape")


def _git_config_candidates(env: Mapping[str, str]) -> list[str]:
    """The global and system files git reads, present or not (one made later is a change)."""
    home = env.get("HOME")
    xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else None)
    out = [env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"]
    if env.get("GIT_CONFIG_GLOBAL"):
        out.append(env["GIT_CONFIG_GLOBAL"])
    else:
        out += [p for p in (xdg and os.path.join(xdg, "git", "config"),) if p]
        out += [os.path.join(home, ".gitconfig")] if home else []
    return out


def git(found: Found, env: Mapping[str, str]) -> None:
    """What git runs on the host from this workspace: its effective hooks directory, the
    configuration files it reads, and the programs and directories they name."""
    root = found.root
    found.read.update(_git_config_candidates(env))
    found.read.add(os.path.join(root, ".git"))
    ask = ["rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-path", "hooks"]
    where = _git(ask, root, env)
    top = root
    if where is not None:
        lines = where.splitlines()
        if len(lines) >= 3:
            top, gitdir, hooks = lines[0], lines[1], lines[2]
            found.read.update(
                os.path.join(gitdir, name) for name in ("config", "config.worktree", "HEAD")
            )
            found.add(
                os.path.join(root, hooks),
                "it is git's hooks directory: git runs its hooks on the host",
            )
            found.run_dirs[os.path.normpath(os.path.join(root, hooks))] = top
    listing = _git(["config", "--show-origin", "-z", "--list"], root, env)
    if listing is None:
        return
    home = env.get("HOME")
    items = listing.split("\0")
    for i in range(0, len(items) - 1, 2):
        origin, entry = items[i], items[i + 1]
        key, _, value = entry.partition("\n")
        key = key.lower()
        source = None
        if origin.startswith("file:"):
            source = os.path.normpath(os.path.join(root, origin[5:]))
            found.read.add(source)
            found.add(source, "it is git configuration: it names programs git runs")
        shown = found.shown(source) if source else origin
        if _GIT_INCLUDE.fullmatch(key) and source is not None:
            target = _expand(value, top, home)
            found.add(
                os.path.join(os.path.dirname(source), target),
                f"it is git configuration included by {shown}",
            )
        elif _GIT_DIRS.fullmatch(key):
            target = _expand(value, top, home)
            found.add(os.path.join(top, target), f"it is named by {key} in {shown}: git runs it")
        elif _GIT_PROGRAMS.fullmatch(key):
            why = f"it is named by {key} in {shown}: git runs it on the host"
            for named in named_paths(value.lstrip("!"), top, home=home):
                found.add(named, why)


# -- ctxnb's own settings --------------------------------------------------------------------
def _load_toml(path: str, found: Found) -> Any:
    found.read.add(path)
    text = _read_text(path)
    if text is None:
        return None
    import tomllib  # only when there is a file to read

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(
            f"{path}: not valid TOML ({e}); ctxnb cannot tell which programs its settings "
            "start, so it cannot protect them. Fix the file (ctxnb cannot load it either)."
        ) from None


def _started(data: Any, where: str = "") -> Iterator[tuple[str, str, str | None]]:
    """(where, command with its arguments, cwd) for every table of ctxnb's settings that
    names a program to start (a ``command`` string): an outside MCP server today, and
    whatever table names one tomorrow, found by its shape rather than a list of keys."""
    if isinstance(data, dict):
        command = data.get("command")
        if isinstance(command, str):
            args = data.get("args")
            if isinstance(args, list) and all(isinstance(a, str) for a in args):
                command = " ".join([shlex.quote(command), shlex.join(args)])
            cwd = data.get("cwd")
            yield where or "command", command, cwd if isinstance(cwd, str) else None
        for key, value in data.items():
            if isinstance(value, dict | list) and isinstance(key, str):
                yield from _started(value, f"{where}.{key}" if where else key)
    elif isinstance(data, list):
        for item in data:
            yield from _started(item, where)


def ctxnb_settings(found: Found, env: Mapping[str, str]) -> None:
    """What ctxnb's own settings start on the host: the programs and files named by each
    table with a ``command`` (an outside MCP server of ``[mcp.servers.NAME]`` runs on
    the host unless ``[sandbox] agent`` confines it, and a human may turn that off), in
    the directory it starts in. ``ctxnb.toml`` wins over ``[tool.ctxnb]``, as the
    settings loader reads them."""
    root = found.root
    toml_path = os.path.join(root, "ctxnb.toml")
    pyproject = os.path.join(root, "pyproject.toml")
    table = _load_toml(toml_path, found)
    source = "ctxnb.toml"
    if table is None:
        whole = _load_toml(pyproject, found)
        tool = whole.get("tool") if isinstance(whole, dict) else None
        table = tool.get("ctxnb") if isinstance(tool, dict) else None
        source = "pyproject.toml [tool.ctxnb]"
    else:
        found.read.add(pyproject)
    home = env.get("HOME")
    for where, command, cwd in _started(table):
        base = os.path.normpath(os.path.join(root, cwd)) if cwd else root
        why = f"it is named by {source} ({where}): ctxnb starts it on the host"
        for named in named_paths(command, base, home=home):
            found.add(named, why)


# -- Python ----------------------------------------------------------------------------------
_ENV_WHY = (
    "it is part of a Python environment ({}): its start-up code (site-packages, .pth, "
    "sitecustomize) and programs run on the host"
)


def python_environments(
    found: Found, env: Mapping[str, str], *, top: Sequence[str], on_path: Sequence[str]
) -> None:
    """Every Python environment inside the workspace, whole: the directories ``top`` (the
    workspace's top-level ones) that hold ``pyvenv.cfg`` or ``conda-meta/``, the one ctxnb
    runs in, ``$VIRTUAL_ENV`` and ``$CONDA_PREFIX``; and the workspace's directories on
    ``PATH`` (``on_path``: by name, so '.' or '', the current directory, is no fixed place
    to protect, and a directory elsewhere that links into the workspace is not looked up)."""
    from .ownenv import within

    root = found.root
    for name in top:
        for marker in ("pyvenv.cfg", "conda-meta"):
            path = os.path.join(root, name, marker)
            found.read.add(path)
            if os.path.lexists(path):
                found.add(os.path.join(root, name), _ENV_WHY.format(found.shown(path)))
    found.read.add(os.path.join(root, "pyvenv.cfg"))
    if os.path.lexists(os.path.join(root, "pyvenv.cfg")):
        # A workspace that is itself an environment: its programs and modules, not all of it.
        for name in ("bin", "lib", "lib64", "include", "Scripts", "Lib"):
            found.add(os.path.join(root, name), _ENV_WHY.format("pyvenv.cfg"))
    for path in within(root):
        found.add(path, _ENV_WHY.format("the one ctxnb runs in"))
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = env.get(var)
        if value and os.path.isabs(value):
            found.add(value, _ENV_WHY.format(f"${var}"))
    for entry_path in on_path:
        found.add(
            entry_path,
            "it is a directory on PATH: the programs in it run on the host by their name",
        )


def ctxnb_source(found: Found) -> None:
    """Where the import system loads ctxnb from (an editable install from the workspace
    makes ctxnb's source what every hook and commit imports)."""
    import importlib.util

    spec = importlib.util.find_spec("ctxnb")
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is not None and spec.origin and not places:
        places.append(spec.origin)
    for place in places:
        found.add(
            os.path.abspath(place),
            "it is ctxnb's own source, imported by ctxnb's hooks and commits on the host",
        )


# -- what protected code runs in turn ---------------------------------------------------------
_FOLLOW_MAX_FILES = 256
"""How many files a derivation reads for what they name in turn."""
_FOLLOW_MAX_BYTES = 1 << 20
"""A larger file is a program, not a script: it names nothing ctxnb can read."""
_PY_IMPORT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _script_text(path: str) -> str | None:
    """A script's text, or None for what is no readable script (a directory, a FIFO, a
    binary program, one too large)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _FOLLOW_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _FOLLOW_MAX_BYTES or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def _python_imports(text: str, here: str) -> list[str] | None:
    """What a Python script imports from its own directory (``sys.path[0]`` when it is
    run by its path): for each top-level name, the module and the package of that name
    beside it, present or not (one made later would be imported first, before the
    standard library's). None when the text is not Python."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    names: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.name.split(".")[0], None) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names[node.module.split(".")[0]] = None
    out: list[str] = []
    for name in names:
        if _PY_IMPORT.match(name):
            out += [os.path.join(here, name + ".py"), os.path.join(here, name)]
    return out


def _lines(text: str) -> Iterator[str]:
    """A script's commands: its lines with continuations joined, comments dropped."""
    pending = ""
    for raw in text.splitlines():
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        line, pending = (pending + raw).strip(), ""
        if line and not line.startswith("#"):
            yield line
    if pending.strip():
        yield pending.strip()


def _named_by_script(path: str, text: str, base: str, home: str | None) -> list[str]:
    """The paths the script at ``path``, run in ``base``, names: a Python script's
    imports from beside it; any other text's words, read as :func:`named_paths` reads a
    command, line by line (a directory it names is not taken whole: ``exclude: tests/``
    names what a check skips), and the files that exist beside the script."""
    here = os.path.dirname(path)
    first = text.split("\n", 1)[0]
    if path.endswith(".py") or (first.startswith("#!") and "python" in first):
        imported = _python_imports(text, here)
        if imported is not None:
            return imported
    out: list[str] = []
    for line in _lines(text):
        out += [p for p in named_paths(line, base, home=home) if not os.path.isdir(p)]
        if here != base:
            out += [p for p in named_paths(line, here, home=home) if os.path.isfile(p)]
    return list(dict.fromkeys(out))


def follow(found: Found, env: Mapping[str, str]) -> None:
    """What the protected files run in turn, added to ``found``: a hook script that runs
    ``./scripts/lint.sh`` makes that script run on the host too, and so on down the
    chain; git's hooks (each file of the hooks directory, wherever it lies) are read
    the same way, so the configuration a ``pre-commit`` hook reads is protected. Each
    followed file is read (its stat keys the cache). At most :data:`_FOLLOW_MAX_FILES`
    files are read; what runs beyond them is not followed."""
    root, home = found.root, env.get("HOME")
    queue: list[tuple[str, str]] = []
    for run_dir, base in sorted(found.run_dirs.items()):
        found.read.add(run_dir)  # a hook added or removed changes the directory
        try:
            with os.scandir(run_dir) as it:
                names = sorted(e.name for e in it if not e.name.endswith(".sample"))
        except OSError:
            continue
        queue += [(os.path.join(run_dir, name), base) for name in names]
    queue += [(os.path.join(root, rel), root) for rel in sorted(found.entries)]
    seen: set[str] = set()
    while queue and len(seen) < _FOLLOW_MAX_FILES:
        path, base = queue.pop(0)
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        text = _script_text(real)
        if text is None:
            continue
        found.read.add(real)
        why = f"it is named by {found.shown(real)}, which runs on the host"
        for named in _named_by_script(real, text, base, home):
            before = len(found.entries)
            found.add(named, why)
            if len(found.entries) > before:
                queue.append((named, base))


def derive(
    root: str | os.PathLike[str],
    bases: Sequence[str],
    env: Mapping[str, str],
    *,
    top: Sequence[str],
    on_path: Sequence[str],
) -> Found:
    """Every source, once: the paths to protect and the files that were read. ``top`` and
    ``on_path`` are the parts of the cache's key that name places (see
    :func:`ctxnb.access.protected.top_dirs`, :func:`~ctxnb.access.protected.path_dirs`)."""
    found = Found(root)
    claude_code(found, bases, env)
    git(found, env)
    ctxnb_settings(found, env)
    python_environments(found, env, top=top, on_path=on_path)
    ctxnb_source(found)
    follow(found, env)
    found.read.add(os.path.realpath(sys.executable))
    return found
