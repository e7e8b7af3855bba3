"""Codex's ``apply_patch`` envelope, read for the files a patch touches.

Codex edits files with its own patch language (``codex-rs/apply-patch``), not a unified
diff: ``*** Begin Patch``, then per file ``*** Add File:``, ``*** Delete File:`` or
``*** Update File:`` (with an optional ``*** Move to:``) and ``@@`` chunks of context,
``-`` and ``+`` lines, then ``*** End Patch``. The replay needs which files changed and,
when the file's text is known, what it became.
"""

from __future__ import annotations

import posixpath

from ._shell import FileMemory
from .model import FileTouch

__all__ = ["parse_apply_patch"]


def parse_apply_patch(
    patch: str, memory: FileMemory, cwd: str | None = None, *, root: str | None = None
) -> list[FileTouch]:
    """The file touches of a Codex ``apply_patch`` envelope.

    ``*** Begin Patch`` … ``*** End Patch`` holds ``*** Add File: P`` (lines ``+``),
    ``*** Delete File: P`` and ``*** Update File: P`` (an optional ``*** Move to: Q``, then
    ``@@`` chunks of `` ``/``-``/``+`` lines). An update's content is computed when the
    file's whole text is known and every chunk's old lines are found in it. A path under
    ``root`` (the session's directory) is made relative to it.

    Raises:
        ValueError: the text is not an apply_patch envelope.

    Example:
        >>> p = "*** Begin Patch\\n*** Add File: a.py\\n+x = 1\\n*** End Patch"
        >>> [(f.path, f.op, f.content) for f in parse_apply_patch(p, FileMemory())]
        [('a.py', 'create', 'x = 1\\n')]
    """
    lines = patch.strip().split("\n")
    if not lines or lines[0].strip() != "*** Begin Patch":
        raise ValueError("an apply_patch input starts with '*** Begin Patch'")
    touches: list[FileTouch] = []
    i = 1

    def where(p: str) -> str:
        p = p.strip()
        if root and p.startswith(root.rstrip("/") + "/"):
            # Codex's model often names files by absolute path; the shell commands that
            # read them name them relative to the session's directory.
            return posixpath.normpath(p[len(root.rstrip("/")) + 1 :])
        return posixpath.normpath(posixpath.join(cwd, p)) if cwd and not p.startswith("/") else p

    while i < len(lines):
        line = lines[i]
        if line.startswith("*** End Patch"):
            break
        if line.startswith("*** Add File: "):
            path = where(line[len("*** Add File: ") :])
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("*** "):
                body.append(lines[i][1:] if lines[i].startswith("+") else lines[i])
                i += 1
            content = "\n".join(body) + "\n" if body else ""
            memory.set(path, content)
            touches.append(FileTouch(path=path, op="create", content=content))
            continue
        if line.startswith("*** Delete File: "):
            path = where(line[len("*** Delete File: ") :])
            memory.forget(path)
            touches.append(FileTouch(path=path, op="delete"))
            i += 1
            continue
        if line.startswith("*** Update File: "):
            path = where(line[len("*** Update File: ") :])
            i += 1
            target = path
            if i < len(lines) and lines[i].startswith("*** Move to: "):
                target = where(lines[i][len("*** Move to: ") :])
                i += 1
            old: list[str] = []
            new: list[str] = []
            chunks: list[tuple[list[str], list[str]]] = []
            while i < len(lines) and not lines[i].startswith("*** "):
                text = lines[i]
                if text.startswith("@@"):
                    if old or new:
                        chunks.append((old, new))
                    old, new = [], []
                elif text.startswith("-"):
                    old.append(text[1:])
                elif text.startswith("+"):
                    new.append(text[1:])
                else:
                    ctx = text[1:] if text.startswith(" ") else text
                    old.append(ctx)
                    new.append(ctx)
                i += 1
            if old or new:
                chunks.append((old, new))
            after = _apply_chunks(memory.get(path), chunks)
            old_text = "\n".join("\n".join(o) for o, _ in chunks)
            new_text = "\n".join("\n".join(n) for _, n in chunks)
            if target != path:
                memory.forget(path)
                touches.append(FileTouch(path=path, op="delete"))
                touches.append(FileTouch(path=target, op="write", content=after))
            else:
                touches.append(
                    FileTouch(
                        path=path, op="edit", content=after, old_text=old_text, new_text=new_text
                    )
                )
            if after is None:
                memory.forget(target)
            else:
                memory.set(target, after)
            continue
        i += 1  # a stray line between file sections: apply_patch ignores it too
    return touches


def _apply_chunks(base: str | None, chunks: list[tuple[list[str], list[str]]]) -> str | None:
    if base is None:
        return None
    text = base
    pos = 0
    for old, new in chunks:
        if not old:
            text = text.rstrip("\n") + "\n" + "\n".join(new) + "\n"
            continue
        needle = "\n".join(old)
        at = text.find(needle, pos)
        if at < 0:
            return None
        text = text[:at] + "\n".join(new) + text[at + len(needle) :]
        pos = at + len("\n".join(new))
    return text
