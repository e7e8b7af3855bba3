"""The ``ctxnb`` command line: a thin layer over the library.

Every command parses its arguments, calls the library and turns a
:class:`~ctxnb.errors.CtxnbError` into a one-line message and exit code 1. Imports
are done inside each command so that fast paths (the Claude Code hook) do not pay for
pandas and pyarrow.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # argparse only when a parser is built: the hook fast path in main() needs none.
    import argparse

    Handler = Callable[[argparse.Namespace], int]

__all__ = ["build_parser", "main"]

_COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Handler]] = {}


def command(name: str, help: str) -> Callable[[Handler], Handler]:
    """Register a sub-command; its docstring's first paragraph is its description."""

    def deco(fn: Handler) -> Handler:
        def configure(p: argparse.ArgumentParser) -> None:
            for args, kwargs in getattr(fn, "_ctxnb_args", []):
                if callable(kwargs.get("help")):
                    # A help text computed from a table its module would import.
                    kwargs = {**kwargs, "help": kwargs["help"]()}
                p.add_argument(*args, **kwargs)

        _COMMANDS[name] = (configure, fn)
        fn._ctxnb_help = help  # type: ignore[attr-defined]
        return fn

    return deco


def arg(*args: Any, **kwargs: Any) -> Callable[[Handler], Handler]:
    """An argument of a sub-command, as ``add_argument`` takes it. ``help`` may be a
    function that returns the text: it runs only when that command's parser is built, so
    registering the command imports nothing it needs."""

    def deco(fn: Handler) -> Handler:
        lst = getattr(fn, "_ctxnb_args", [])
        fn._ctxnb_args = [(args, kwargs), *lst]  # type: ignore[attr-defined]
        return fn

    return deco


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _workspace(path: str | None):  # type: ignore[no-untyped-def]
    from ..workspace import Workspace

    return Workspace.open(path or os.getcwd())


def recorded_root(path: str | None, *, other: str = "pass the workspace with -w") -> str:
    """The workspace directory of a command that only reads: one with no ``.ctxnb/`` is
    not a ctxnb workspace, which is said, and nothing is created there (opening it would
    make a store, and a read command must leave the folder as it found it).

    ``other`` is how the command is pointed at another workspace, for the message."""
    root = os.path.abspath(path or os.getcwd())
    if os.path.isdir(root) and not os.path.isdir(os.path.join(root, ".ctxnb")):
        from ..errors import NotFoundError

        raise NotFoundError(
            f"{root} is not a ctxnb workspace (it has no ctxnb store, .ctxnb/), so nothing "
            "is recorded there; run `ctxnb index` in it to make one (`ctxnb init` sets a "
            f"project up with governance), or {other}"
        )
    return root


def _read_workspace(path: str | None):  # type: ignore[no-untyped-def]
    """The workspace for a command that only reads (opening would make an empty store)."""
    recorded_root(path)
    return _workspace(path)


def workspace_path(ws: Any, file: str) -> str:
    """A FILE argument as the workspace names it: a path that exists from the current
    directory (or an absolute one) is made relative to the workspace root; any other is
    taken as relative to the root already.

    A path that lies outside the workspace is refused here, naming both: passed on, it
    would reach the tools as ``../../etc/passwd`` and be refused for a ``..`` the user
    never typed, or be looked up in a store that can never hold it."""
    given = os.path.isabs(file) or os.path.exists(file)
    full = os.path.abspath(file) if given else os.path.normpath(os.path.join(ws.root, file))
    rel = os.path.relpath(full, ws.root)
    if not _outside(rel):
        return rel if given else file
    # The root may be named through a link (/tmp → /private/tmp): compare the real
    # directories, with the last component as typed (a link there is the tools' call).
    real = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
    rel = os.path.relpath(real, os.path.realpath(ws.root))
    if _outside(rel):
        from ..errors import ResolverError

        raise ResolverError(
            f"{file} is outside the workspace {ws.root}; ctxnb works on the files under "
            "it: name one of them, or pass the workspace that holds this file with -w"
        )
    return rel


def _outside(rel: str) -> bool:
    return rel == ".." or rel.startswith("../")


@command("index", help="index a workspace and print what changed")
@arg("path", nargs="?", default=None, help="workspace directory (default: current)")
@arg("--json", action="store_true", help="print the report as JSON")
@arg("--list", action="store_true", help="also list every changed file, one per line")
@arg("--no-progress", action="store_true", help="never show a progress bar")
def _cmd_index(ns: argparse.Namespace) -> int:
    """Prints one summary line; a progress bar on stderr when it is a terminal."""
    with _workspace(ns.path) as ws:
        report = ws.index(progress=False if ns.no_progress else None, settle=False)
        # The summary as soon as the walk ends: the store's compaction after a large
        # index takes seconds, and says nothing.
        if ns.json:
            _out(json.dumps({"root": report.root, **report.counts(), "files": report.files}))
        else:
            _out(str(report))
            if ns.list:
                from ..redaction.redactor import redact_text

                # A file's name can hold a secret: the listing leaves redacted like
                # `ctxnb show`.
                for rel, action in sorted(report.changed_paths.items()):
                    _out(f"  {action:<8} {redact_text(rel)}")
        sys.stdout.flush()
        ws.settle_store()
    if _OWN_PROCESS:
        # The process ends now, and the interpreter's last collection would walk every
        # object alive (a tenth of an unchanged re-index's time): frozen, it passes over
        # them. The workspace is closed and every file written; nothing kept needs a
        # finalizer. Only as the `ctxnb` process: a caller of main() keeps its heap.
        import gc

        gc.freeze()
    return 0


@command(
    "history",
    help="list the stored versions of one file, who wrote each, and ids `ctxnb show` takes",
)
@arg("file", help="path of the file, relative to the workspace or absolute")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
def _cmd_history(ns: argparse.Namespace) -> int:
    from .._util.text import visible
    from ..ids import short_id
    from ..indexer import is_deleted
    from ..redaction.redactor import redact_text

    with _read_workspace(ns.workspace) as ws:
        path = workspace_path(ws, ns.file)
        versions = ws.history(path)
        if not versions:
            from ..errors import NotFoundError

            raise NotFoundError(f"{ns.file!r} has no stored versions; run `ctxnb index` first")
        oid = short_id(ws.store, versions[0].doc["xt/id"])
        width = max(len(f"{oid}@{v.tx_id}") for v in versions)
        _out(
            f"{'version':<{width}}  {'tx time (UTC)':<29} {'action':<8} {'chars':>8}  "
            "author (contributor)"
        )
        prev = None
        for v in versions:
            d = v.doc
            if is_deleted(d):
                action = "deleted"
            elif prev is None:
                action = "created"
            else:
                action = "updated"
            # The author comes from a trace record, text anyone with the ledger could
            # have written: shown with its controls escaped, and redacted.
            who = v.author if v.record_id is None else f"{v.author} ({v.contributor_label})"
            _out(
                f"{oid + '@' + str(v.tx_id):<{width}}  "
                f"{v.tx_time.isoformat(timespec='milliseconds'):<29} "
                f"{action:<8} {d.get('char_count', 0):>8}  {visible(redact_text(who))}"
            )
            prev = d
    return 0


@command(
    "restore",
    help="put a file back as it was in a stored version (default: before its last change)",
)
@arg("file", help="path of the file, relative to the workspace or absolute")
@arg("--version", default=None, help="a version id (<id>@<tx>) or a tx id from `ctxnb history`")
@arg("--intent", default=None, help="governed workspaces: record the restore under this intent")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
def _cmd_restore(ns: argparse.Namespace) -> int:
    """A human's undo: governed like a write (path policy, trace record with contributor
    ``human``), but not bound to an intent's scope unless ``--intent`` is given. A folder
    with no store has no version to go back to: it is said, and nothing is created."""
    with _read_workspace(ns.workspace) as ws:
        path = workspace_path(ws, ns.file)
        session = ws.session("cli-restore")
        tools = ws.tools(session, caller="cli")
        engine = getattr(tools, "engine", None)
        if engine is not None:
            engine.contributor_type = "human"
            if ns.intent:
                engine.select_active_intent(ns.intent)
            else:
                skip = {"intent-presence", "intent-validity", "scope"}
                engine.pre = [p for p in engine.pre if p.name not in skip]
        result = tools.restore_file(path, ns.version)
        session.save()
    _out(result.message)
    return 0


@command("show", help="print a stored object (or one version of it) as JSON")
@arg(
    "id",
    help="an object id or version id (<id>@<tx>) as `ctxnb history` prints; a unique "
    "prefix of the id is enough",
)
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg("--as-of", type=int, default=None, help="the version current at this transaction id")
def _cmd_show(ns: argparse.Namespace) -> int:
    from ..errors import NotFoundError
    from ..ids import resolve_version
    from ..redaction.redactor import redact_data

    with _read_workspace(ns.workspace) as ws:
        oid, tx = resolve_version(ws.store, ns.id)
        at = ns.as_of if ns.as_of is not None else tx
        doc = ws.store.as_of(oid, at) if at is not None else ws.store.get(oid)
    if doc is None:
        raise NotFoundError(f"{oid} has no version at or before transaction {at}")
    # Stored objects hold what files held: printed, they leave redacted like any exit.
    _out(json.dumps(redact_data(doc), indent=2, ensure_ascii=False, default=str))
    return 0


@command("store", help="check every file of the object store against its log (store verify)")
@arg("action", choices=("verify",), help="verify: exit 0 if every file is as committed, 1 if not")
@arg("path", nargs="?", default=None, help="workspace directory (default: current)")
def _cmd_store(ns: argparse.Namespace) -> int:
    """Read every segment, fold, snapshot, doc cache and archive that .ctxnb/store/txlog
    names, whole, and check each against the size and SHA-256 committed with it; name
    the first damaged file if one is."""
    from ..store.objectstore import ObjectStore

    root = recorded_root(ns.path, other="pass the workspace as PATH")
    store_dir = os.path.join(root, ".ctxnb", "store")
    with ObjectStore(store_dir, create=False, fold_after=None) as store:
        report = store.verify()
    _out(f"{store_dir}: {report}")
    return 0


@command("context", help="assemble a session's context and print its tokens per section and item")
@arg("session", help="a stored session id (or a unique prefix of one)")
@arg("-w", "--workspace", default=None, help="workspace directory (default: current)")
@arg(
    "--strategy",
    default="keep-all",
    metavar="SPEC",
    help="the context strategy, as `ctxnb replay --strategy` takes it (default: keep-all)",
)
@arg("--budget", type=int, default=None, help="total token budget (default: no limit)")
@arg("--items", type=int, default=20, help="list at most this many items (default: 20)")
@arg("--text", action="store_true", help="print the assembled context itself instead")
def _cmd_context(ns: argparse.Namespace) -> int:
    """Like Claude Code's /context: what the session's context holds and what it costs."""
    from ..context import usage_report
    from ..errors import ConfigError
    from ..ids import resolve_id
    from ..strategies.registry import parse_strategy

    try:
        strategy = parse_strategy(ns.strategy)
    except ValueError as e:
        raise ConfigError(f"--strategy: {e}") from None
    with _read_workspace(ns.workspace) as ws:
        sid = resolve_id(ws.store, ns.session, type="session")
        session = ws.session(sid)
        try:
            ctx = session.assemble(strategy, ns.budget, record=False)
        finally:
            session.close()
    if ns.text:
        _out(ctx.to_text())
    else:
        _out(usage_report(ctx, items=ns.items, title=f"session {sid}"))
    return 0


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``ctxnb`` command (used for the CLI reference too).

    ``only`` names the sub-commands whose arguments are added; the others are listed with
    their help and take none. The command line passes the one command it runs (none for
    ``ctxnb --help``), so it never builds, nor imports for, the rest. Default: all.
    When every name in ``only`` is a registered command and ``only`` is not empty, the
    other commands are left out altogether: a parser per command costs about a
    millisecond (argparse looks up translations for every help text), and a command's
    own help and errors do not list the others.
    """
    import argparse

    from .._version import __version__

    class Formatter(argparse.HelpFormatter):
        # argparse's own, given the width it would ask shutil for: its default imports
        # shutil (and bz2, lzma with it) for the first parser, about 2 ms of a process
        # that parses one command line.
        def __init__(
            self,
            prog: str,
            indent_increment: int = 2,
            max_help_position: int = 24,
            width: int | None = None,
        ) -> None:
            width = terminal_columns() - 2 if width is None else width
            super().__init__(prog, indent_increment, max_help_position, width)

    parser = argparse.ArgumentParser(
        prog="ctxnb",
        description="ctxnb: govern, version and assemble what an LLM coding agent sees.",
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"ctxnb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    alone = only is not None and only and all(name in _COMMANDS for name in only)
    for name, (configure, fn) in sorted(_COMMANDS.items()):
        if alone and only is not None and name not in only:
            continue
        p = sub.add_parser(
            name,
            help=fn._ctxnb_help,  # type: ignore[attr-defined]
            description=fn._ctxnb_help,  # type: ignore[attr-defined]
            formatter_class=Formatter,
        )
        if only is None or name in only:
            configure(p)
        p.set_defaults(_handler=fn)
    return parser


def terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` gives it (``$COLUMNS``
    when a positive number, else the terminal of ``sys.__stdout__``, else 80), without
    importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns


# Commands defined in other modules register themselves on import. Only the module a
# command needs is imported, so `ctxnb hook pre-tool-use` starts fast.
_PLUGIN_MODULES: dict[str, str] = {
    "a2a": "ctxnb.cli.integrations",
    "acp": "ctxnb.cli.integrations",
    "demo": "ctxnb.cli.samples",
    "files": "ctxnb.cli.files",
    "hook": "ctxnb.cli.integrations",
    "init": "ctxnb.cli.govern",
    "init-governance": "ctxnb.cli.govern",
    "mcp": "ctxnb.cli.integrations",
    "merge": "ctxnb.cli.merge",
    "open": "ctxnb.cli.files",
    "patch": "ctxnb.cli.files",
    "replay": "ctxnb.cli.replay",
    "sandbox": "ctxnb.cli.govern",
    "stats": "ctxnb.cli.files",
    "tasks": "ctxnb.cli.tasks",
    "trace": "ctxnb.cli.govern",
    "tutorials": "ctxnb.cli.samples",
    "why": "ctxnb.cli.govern",
}


# True when main() runs as the `ctxnb` process itself (argv from sys.argv), not called.
_OWN_PROCESS = False

_FAST_HOOK_EVENTS = frozenset(
    {"pre-tool-use", "post-tool-use", "user-prompt-submit", "post-compact", "session-end"}
)


def _load_plugins(argv: Sequence[str]) -> None:
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in _COMMANDS:
        return  # one of this module's own commands (`index`, `history` …): none needed
    wanted = (
        [_PLUGIN_MODULES[first]]
        if first in _PLUGIN_MODULES
        else sorted(set(_PLUGIN_MODULES.values()))
    )
    for mod in wanted:
        try:
            __import__(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 a ctxnb error, 2 a usage error,
    130 interrupted by Ctrl-C)."""
    global _OWN_PROCESS
    args = list(argv) if argv is not None else sys.argv[1:]
    _OWN_PROCESS = argv is None
    if argv is None and len(args) == 2 and args[0] == "hook" and args[1] in _FAST_HOOK_EVENTS:
        return _hook_process(args)
    try:
        return _main(args)
    except KeyboardInterrupt:
        # Like git: one line and 128 + SIGINT. The store needs no cleanup: a transaction
        # is either committed whole or invisible, and `with` blocks have closed it.
        name = next((a for a in args if not a.startswith("-")), "")
        # On a terminal, start a fresh line after the echoed ^C or a progress bar.
        lead = "\n" if sys.stderr.isatty() else ""
        sys.stderr.write(f"{lead}ctxnb{' ' + name if name else ''}: interrupted\n")
        return 130


def _hook_process(args: list[str]) -> int:
    """``ctxnb hook EVENT`` as its own process, which Claude Code starts on every tool call.

    The process answers one call and exits, so the cyclic garbage collector is of no use
    to it and costs about a tenth of its time: collections while it imports, and a
    collection of everything at interpreter exit. It is off while the hook runs (a fold of
    the store every 64 edits included: a bounded job in a process about to end); then
    what is alive is frozen, so the collection at exit passes over it (exit still
    runs, closing and flushing as usual). Nothing is skipped that keeps data: every
    record is written with ``os.write`` (and fsynced) before the handler returns.
    """
    import gc

    gc.disable()
    try:
        return main(args)
    finally:
        gc.freeze()


def _unknown_command(name: str) -> int:
    """A mistyped command: one line naming the nearest commands, not argparse's list of
    every choice (exit 2, a usage error, as argparse's own)."""
    import difflib

    near = difflib.get_close_matches(name, sorted(_COMMANDS), n=3, cutoff=0.6)
    guess = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    sys.stderr.write(f"ctxnb: {name!r} is not a ctxnb command{guess} (`ctxnb --help` lists them)\n")
    return 2


def _main(args: list[str]) -> int:
    from ..errors import CtxnbError

    if len(args) == 2 and args[0] == "hook" and args[1] in _FAST_HOOK_EVENTS:
        # Claude Code starts this on every tool call: skip building the parser.
        try:
            from ..integrations.claude_code import run_event
        except Exception as e:  # a broken install must not let a tool call through
            verdict, code = ("blocked", 2) if args[1] == "pre-tool-use" else ("error", 1)
            sys.stderr.write(
                f"ctxnb hook {args[1]}: {verdict}: cannot load the hook ({type(e).__name__}: "
                f"{e}); reinstall ctxnb: pip install -U ctxnb\n"
            )
            return code
        return run_event(args[1])
    passthrough: list[str] | None = None
    if args[:1] == ["sandbox"] and "--" in args:
        # Everything after `--` is the command to run, options and all.
        cut = args.index("--")
        args, passthrough = args[:cut], args[cut + 1 :]
    _load_plugins(args)
    first = next((a for a in args if not a.startswith("-")), None)
    if first is not None and first not in _COMMANDS:
        return _unknown_command(first)
    parser = build_parser(only=() if first is None else (first,))
    ns = parser.parse_args(args)
    if passthrough is not None:
        ns.argv = passthrough
    handler = getattr(ns, "_handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(ns) or 0)
    except CtxnbError as e:
        sys.stderr.write(f"ctxnb {ns.command}: error: {e}\n")
        return 1
    except BrokenPipeError:  # e.g. `ctxnb history x | head`
        return 0
    except OSError as e:
        # The system refused what the input asked for (a missing or unreadable path):
        # one line naming it, not a traceback.
        where = f": {e.filename}" if e.filename else ""
        sys.stderr.write(f"ctxnb {ns.command}: error: {e.strerror or e}{where}\n")
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
