"""A small ``sed`` for replay: applies the scripts agents pass to ``sed -i``.

Replay keeps the content of a file it has seen; an agent's ``sed -i`` then changes it.
Supported: ``s`` (flags ``g``, ``I``), ``d``, ``a``, ``i`` and ``c`` with line-number
addresses, in basic or extended regular expressions. Anything else raises
:class:`SedUnsupported`, and replay forgets the file's content rather than guess.

Example:
    >>> apply_sed("2s/b/B/;1d", "a\\nb\\n", extended=False)
    'B\\n'
"""

from __future__ import annotations

import re

__all__ = ["SedUnsupported", "apply_sed"]


class SedUnsupported(Exception):
    pass


def _bre_to_python(pattern: str, extended: bool) -> str:
    out: list[str] = []
    k = 0
    while k < len(pattern):
        c = pattern[k]
        if c == "\\" and k + 1 < len(pattern):
            nxt = pattern[k + 1]
            if not extended and nxt in "(){}+?|":
                out.append(nxt)
            elif nxt in "<>":
                out.append(r"\b")
            elif nxt.isdigit() or nxt in ".[]*^$\\/&nt":
                out.append("\\" + nxt)
            elif nxt in "wWsSb":
                out.append("\\" + nxt)
            else:
                out.append(re.escape(nxt))
            k += 2
            continue
        if not extended and c in "(){}+?|":
            out.append("\\" + c)
        else:
            out.append(c)
        k += 1
    return "".join(out)


def _sed_replacement(repl: str) -> str:
    out: list[str] = []
    k = 0
    while k < len(repl):
        c = repl[k]
        if c == "\\" and k + 1 < len(repl):
            nxt = repl[k + 1]
            if nxt.isdigit():
                out.append(f"\\g<{nxt}>")
            elif nxt == "n":
                out.append("\n")
            elif nxt == "t":
                out.append("\t")
            else:
                out.append(nxt.replace("\\", "\\\\"))
            k += 2
            continue
        if c == "&":
            out.append("\\g<0>")
        elif c == "\\":
            out.append("\\\\")
        else:
            out.append(c)
        k += 1
    return "".join(out)


def _unescape_text(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def apply_sed(script: str, content: str, extended: bool) -> str:
    """Apply a simple ``sed`` script (s, d, a, i, c with line-number addresses)."""
    trailing_nl = content.endswith("\n")
    lines = content.split("\n")
    if trailing_nl:
        lines.pop()
    k = 0
    s = script
    while k < len(s):
        while k < len(s) and s[k] in " \t\n;":
            k += 1
        if k >= len(s):
            break
        m = re.compile(r"(\d+|\$)?(?:,(\d+|\$))?").match(s, k)
        assert m is not None
        lo = m.group(1)
        hi = m.group(2)
        k = m.end()
        last = len(lines)
        first_line = (last if lo == "$" else int(lo)) if lo else 1
        last_line = (last if hi == "$" else int(hi)) if hi else (first_line if lo else last)
        if k >= len(s):
            raise SedUnsupported("address without command")
        cmd = s[k]
        k += 1
        if cmd == "s":
            delim = s[k]
            k += 1
            parts: list[str] = []
            cur: list[str] = []
            while k < len(s) and len(parts) < 2:
                ch = s[k]
                if ch == "\\" and k + 1 < len(s):
                    if s[k + 1] == delim:
                        cur.append(delim if delim not in ".[]*^$\\" else "\\" + delim)
                    else:
                        cur.append(s[k : k + 2])
                    k += 2
                    continue
                if ch == delim:
                    parts.append("".join(cur))
                    cur = []
                    k += 1
                    continue
                cur.append(ch)
                k += 1
            if len(parts) < 2:
                raise SedUnsupported("unterminated s command")
            fm = re.compile(r"[gIi]*").match(s, k)
            assert fm is not None
            flags = fm.group(0)
            k = fm.end()
            if k < len(s) and s[k] not in " \t\n;}":
                raise SedUnsupported(f"s flag {s[k]!r}")
            rx = re.compile(
                _bre_to_python(parts[0], extended), re.IGNORECASE if "I" in flags else 0
            )
            repl = _sed_replacement(parts[1])
            count = 0 if "g" in flags else 1
            for idx in range(first_line - 1, min(last_line, last)):
                lines[idx] = rx.sub(repl, lines[idx], count=count)
        elif cmd == "d":
            del lines[first_line - 1 : last_line]
        elif cmd in "aic":
            text = s[k:]
            k = len(s)
            if text.startswith("\\"):
                text = text[1:].lstrip("\n")
            else:
                text = text.lstrip()
            new = _unescape_text(text).split("\n")
            if cmd == "a":
                lines[last_line:last_line] = new
            elif cmd == "i":
                lines[first_line - 1 : first_line - 1] = new
            else:
                lines[first_line - 1 : last_line] = new
        else:
            raise SedUnsupported(f"sed command {cmd!r}")
    return "\n".join(lines) + ("\n" if trailing_nl else "")
