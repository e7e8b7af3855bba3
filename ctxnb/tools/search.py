"""Grep-like search over a workspace, with ripgrep.

``search(root, pattern)`` returns every matching line below ``root``. Two backends
give the same answer: ``"ripgrep"`` runs ``rg`` (fast; the ``ripgrep`` wheel is a
dependency of ctxnb, so ``rg`` is installed next to Python) and ``"python"`` walks the
tree itself. ``"auto"`` picks ripgrep when :func:`find_ripgrep` finds it. The answer
is one by construction: ripgrep only proposes lines (every line it matches, plus
every line holding a non-ASCII byte or a control character where the two regex
engines differ), and Python's ``re`` decides each, with the decoding below. The
rules both follow:

* **Order**: by path, compared component by component (``a/b`` before ``a.txt``), then
  by line number. ``max_results`` keeps the first matches in that order.
* **Files searched**: regular files only; symbolic links are never followed (neither
  linked files nor linked directories). The Python backend walks by descriptors (the
  access layer's walk, with ``policy`` or with one that accepts every file), so a
  directory swapped for a link while it runs is never entered either. With a
  ``policy`` (as the agent's file tools always pass), ripgrep is handed the directories
  the policy's walk entered and refused nothing in, and of the others only the files
  it accepted: it opens no file the policy refuses (a denied name, a hard link of a
  denied file, anything in ``.git`` or ``.ctxnb``), and every file it names is matched
  again on a race-free read. Without one, ripgrep is handed the directories and its
  answer is trusted, which is right for a tree nobody changes under the search and
  several times faster. Hidden files and
  directories are searched, except anything named ``.git`` or ``.ctxnb``.
* **Ignores**: git's, decided by ctxnb for both backends (:mod:`ctxnb.access.ignore`):
  ``.gitignore`` files anywhere below ``root`` (deeper files overriding shallower ones,
  whether or not ``root`` is a git repository; one that is a symbolic link is not
  read, as in git), and when ``root`` is in a repository, the ``.gitignore`` files above
  it up to the repository's top, ``info/exclude`` and ``core.excludesFile``. ripgrep
  reads no ignore file itself (no ``.ignore``/``.rgignore`` either). A ``glob`` never
  re-includes an ignored file.
* **Binary files**: a file containing a NUL byte is skipped.
* **Decoding**: a file that is valid UTF-8 is read as UTF-8; any other file is read as
  windows-1252 (the WHATWG "latin1": every byte is a character, so a Latin-1 ``café``
  is found by ``caf.`` and shown as ``café``).
* **Case folding** (``case_sensitive=False``): Python's ``re.IGNORECASE`` on Unicode
  text: simple lowercase mappings plus Python's equivalence sets, so ``i`` also
  matches ``İ`` and ``ı``, ``s`` matches ``ſ``, ``k`` matches the Kelvin sign.
* **Globs** (``globs``): gitignore-style globs matched against each file's path
  relative to ``root`` (``*`` and ``?`` stop at ``/``, ``**`` crosses directories,
  ``{a,b}`` alternatives, a glob without ``/`` matches the file name at any depth).
  A glob starting with ``!`` excludes; the last glob that matches decides; when there
  are include globs, a file must match one. An exclude glob that matches a directory
  skips the directory.
* **Lines**: split on ``\\n``; ``line`` is returned without its ``\\n`` or ``\\r\\n``.
  Matching sees the line without ``\\n`` (a ``\\r`` before it is part of the line).
* **Regex dialect**: the intersection of Python's ``re`` and ripgrep's Rust regex.
  Patterns are checked before searching and these are refused with
  ``InvalidPatternError``: lookaround, backreferences, conditionals, atomic groups
  and possessive quantifiers, ``\\A``/``\\Z``, the ``a``/``L`` flags, ``{,n}``,
  ``(?#…)`` comments, ``\\N{…}``, ``\\p{…}``, POSIX classes and set operations, and
  anything that can only match a line break. With ``regex=False`` the pattern is a
  fixed string (metacharacters are literal).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "app.py").write_text("import os\\nprint(os.sep)\\n")
    >>> [(m.path, m.line_number, m.line) for m in search(root, r"os\\.")]
    [('app.py', 2, 'print(os.sep)')]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ctxnb.errors import CtxnbError

from ._ripgrep import _search_ripgrep, find_ripgrep, ripgrep_available
from ._searchfiles import (
    Match,
    _check_root,
    _policy_walk,
    _search_python,
    _whole_tree,
)
from ._searchpatterns import InvalidPatternError, _compile, _GlobFilter

if TYPE_CHECKING:
    from ctxnb.access.fdio import PathPolicy

__all__ = [
    "InvalidPatternError",
    "Match",
    "find_ripgrep",
    "glob_files",
    "ripgrep_available",
    "search",
]

Backend = Literal["auto", "ripgrep", "python"]

# --------------------------------------------------------------------------- search


def search(
    root: Path | str,
    pattern: str,
    *,
    globs: Sequence[str] | None = None,
    regex: bool = True,
    case_sensitive: bool = True,
    max_results: int | None = None,
    exclude: Callable[[str], bool] | None = None,
    backend: Backend = "auto",
    policy: PathPolicy | None = None,
    after: tuple[str, int] | None = None,
) -> list[Match]:
    """Find the lines matching ``pattern`` in the files below ``root``.

    Args:
        root: the directory to search.
        pattern: a regular expression (the dialect shared by Python and ripgrep), or
            a fixed string with ``regex=False``.
        globs: gitignore-style globs selecting files; ``!glob`` excludes.
        regex: whether ``pattern`` is a regular expression.
        case_sensitive: whether case must match.
        max_results: keep only the first matches (in path/line order); ``None``: all.
        exclude: called with each file's relative posix path; ``True`` skips the file
            (for example a path policy's deny rules).
        backend: ``"ripgrep"``, ``"python"`` or ``"auto"`` (ripgrep when installed).
        policy: read only through this path policy (its first root must be ``root``):
            the Python backend walks by descriptors, and ripgrep only nominates files,
            which are then read race-free and matched again here, so every byte
            returned comes from a file the policy accepts, even while directories are
            swapped for symbolic links during the search.
        after: a ``(path, line_number)`` position: only the matches after it, in the
            result order, are returned (the next page of a search that stopped there).
            Files before it are not read; what changed before it does not move it.

    Returns:
        The matches, sorted by path (component-wise) then line number.

    Raises:
        InvalidPatternError: the pattern or a glob is invalid or not in the dialect.
        NotFoundError: ``root`` is not a directory.
        CtxnbError: ``backend="ripgrep"`` but ``rg`` is not installed, or it failed.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "notes.md").write_text("a+b\\nA+B\\n")
        >>> [m.line for m in search(root, "a+b", regex=False, case_sensitive=False)]
        ['a+b', 'A+B']
    """
    root = _check_root(root)
    compiled = _compile(pattern, regex=regex, case_sensitive=case_sensitive)
    if max_results is not None and max_results < 0:
        raise ValueError(f"max_results must be >= 0 or None, got {max_results}")
    glob_filter = _GlobFilter(list(globs or ()))
    cap = max_results
    if after is not None:
        exclude, cap = _after(after, exclude, max_results)
    if backend == "auto":
        backend = "ripgrep" if ripgrep_available() else "python"
    if backend == "ripgrep":
        try:
            matches = _search_ripgrep(
                root,
                pattern,
                compiled,
                regex,
                case_sensitive,
                globs or (),
                glob_filter,
                exclude,
                policy,
                # rg opens directories by name, so one swapped for a link during the
                # search is followed: under a policy, only what a race-free read matches
                # again counts (read there, group by group, until ``cap`` are final).
                enough=cap,
                start=None if after is None else after[0],
            )
        except CtxnbError:
            if find_ripgrep() is None:
                raise
            # rg trips over a tree that changes while it runs; the descriptor walk does not.
            backend = "python"
    if backend == "python":
        matches = _search_python(root, compiled, glob_filter, exclude, cap, policy)
    elif backend != "ripgrep":
        raise ValueError(f"backend must be 'auto', 'ripgrep' or 'python', got {backend!r}")
    if after is not None:
        path, line = after
        matches = [m for m in matches if m.path != path or m.line_number > line]
    return matches if max_results is None else matches[:max_results]


def _after(
    after: tuple[str, int], exclude: Callable[[str], bool] | None, max_results: int | None
) -> tuple[Callable[[str], bool], int | None]:
    """The exclude of a search that starts after ``after`` and the cap of what it reads.

    Files before the position's file (component-wise, the result order) are excluded,
    so neither backend reads them. The position's own file holds at most ``line``
    matches at or before it: the cap grows by that much, and they are dropped after.
    """
    key = after[0].split("/")

    def before(rel: str) -> bool:
        return rel.split("/") < key or (exclude is not None and exclude(rel))

    return before, None if max_results is None else max_results + max(after[1], 0)


def glob_files(root: Path | str, pattern: str, *, policy: PathPolicy | None = None) -> list[str]:
    """List the files below ``root`` that match a gitignore-style glob.

    Follows the same rules as ``search`` (``.gitignore`` honoured, symlinks not
    followed, ``.git``/``.ctxnb`` skipped; binary files are listed).

    Args:
        root: the directory.
        pattern: a glob such as ``"**/*.py"``, ``"src/*.{js,ts}"`` or ``"README*"``.
        policy: list only what this path policy accepts (its first root must be
            ``root``); by default every file but ``.git`` and ``.ctxnb``.

    Returns:
        Relative posix paths, sorted component-wise.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "pkg").mkdir()
        >>> _ = (root / "pkg" / "a.py").write_text("")
        >>> _ = (root / "setup.cfg").write_text("")
        >>> glob_files(root, "*.py")
        ['pkg/a.py']
    """
    root = _check_root(root)
    glob_filter = _GlobFilter([pattern])
    return [rel for rel, _ in _policy_walk(policy or _whole_tree(root), root, glob_filter, None)]
