"""docPath as the key of a document: the one file a case or Unicode variant names.

The docPath key (:func:`ctxnb.resolver.doc_path`) is lowercase and NFC-normalized, so
``src/App.py``, ``src/app.py`` and ``src/app.py`` written with a decomposed accent are
one key. On a case-sensitive filesystem they are different names; a file tool that took
the name as given would read "not found" for a file it has just reported, or write a
second file beside the first. :func:`find_document` settles which file a path means:

* the exact name, when something is there;
* else the one file under the same root whose key is the path's key;
* else, when several are, :class:`~ctxnb.errors.PolicyError` ``AMBIGUOUS_DOC_PATH``;
* else the path as given (a new document).

A variant that the policy refuses (``.ENV`` beside a denied ``.env``) is refused too:
the key names a document the agent may not touch, so no second file gets that key.

The search is the policy's own descriptor walk, pruned to the directories whose key is a
prefix of the path's key: a miss costs one directory listing per level, never a tree walk.

Example:
    >>> import pathlib, tempfile
    >>> from ctxnb.access import PathPolicy
    >>> ws = pathlib.Path(tempfile.mkdtemp())
    >>> (ws / "src").mkdir()
    >>> _ = (ws / "src" / "App.py").write_text("x = 1\\n")
    >>> policy = PathPolicy([ws])
    >>> find_document(policy, policy.check("SRC/app.py")).rel
    'src/App.py'
    >>> find_document(policy, policy.check("src/new.py")).rel
    'src/new.py'
"""

from __future__ import annotations

from ..errors import NotFoundError, PolicyError
from ..resolver import doc_path
from .fdio import PathKind, PathPolicy
from .pathrules import SafePath

__all__ = ["find_document"]


def find_document(policy: PathPolicy, sp: SafePath, kind: PathKind | None = None) -> SafePath:
    """The file ``sp`` names as a document (see the module docstring).

    Args:
        policy: the policy ``sp`` was checked by; the search walks through it.
        sp: a path the policy accepted.
        kind: what :meth:`PathPolicy.check_kind` found at ``sp`` in this same call,
            if the caller has it: whether the exact name is there is then known
            without walking to it again.

    Raises:
        PolicyError: ``AMBIGUOUS_DOC_PATH`` when several files share the key and none
            has the exact name; ``PATH_DENIED`` when the one file with the key is refused.
    """
    if not sp.parts or (kind is not None and kind != "missing"):
        return sp
    if kind is None:
        try:
            policy.stat(sp)
            return sp
        except NotFoundError:
            pass
    key = doc_path(sp.rel)
    found: list[SafePath] = []
    refused: list[tuple[str, str]] = []

    def skip(rel: str, is_dir: bool) -> bool:
        k = doc_path(rel)
        return not key.startswith(k + "/") if is_dir else k != key

    def on_refused(rel: str, rule: str) -> None:
        if doc_path(rel) == key:
            refused.append((rel, rule))

    for entry in policy.walk(skip=skip, on_refused=on_refused):
        if entry.root == sp.root:
            found.append(entry.safe)
    if refused:
        rel, rule = refused[0]
        raise PolicyError(
            "PATH_DENIED",
            f"Path {sp.rel!r} is refused: it names the same document as {rel!r}, which "
            f"is refused (rule: {rule}).",
            required_action="Use another path.",
            details={"path": sp.rel, "rule": rule, "document": rel},
        )
    if len(found) > 1:
        names = ", ".join(sorted(f.rel for f in found))
        raise PolicyError(
            "AMBIGUOUS_DOC_PATH",
            f"{sp.rel!r} names {len(found)} files that differ only in case or Unicode "
            f"normalization: {names}",
            required_action="Use one file's exact path.",
            details={"path": sp.rel, "files": names},
        )
    return found[0] if found else sp
