"""The one shell lexer: a command line read the way bash reads it, without running it.

Command risk (:mod:`ctxnb.shell.risk`) and trajectory replay (:mod:`ctxnb.replay`)
both need the words, operators and redirections of a command an agent runs; they read
it here. The lexer follows bash's quoting rules: ``'…'``, ``"…"`` (``\\`` escapes only
``$ ` " \\`` and a newline), ANSI-C ``$'…'`` (decoded), ``$"…"``, backslash escapes and
line continuations, comments (``#`` at the start of a word), the operators ``;``,
``&``, ``&&``, ``||``, ``|``, ``|&``, ``;;``, ``(`` and ``)``, redirections with their
descriptor (``2>``, ``&>``, ``>&``, ``<<<`` …), here-documents (the body comes from the
lines after the one that opened it; ``<<-`` strips leading tabs) and the expansions that
run code: ``$(…)``, backticks, ``<(…)``/``>(…)``, and those nested in ``${…}``,
``$((…))`` and unquoted here-document bodies. Operators inside quotes are plain text
(``grep ">" f`` does not redirect), which :mod:`shlex` cannot tell. Inside ``[[ … ]]``
``<``, ``>``, ``&&`` and ``||`` are words, and ``((…))`` at the start of a command is
one arithmetic word, as in bash.

A word's text is what the command receives after quote removal; expansions (``$x``,
``$(…)``, globs) stay as written, and the scripts of command substitutions are listed
apart so a caller can read them in turn.

Example:
    >>> script = parse("grep '>' a.txt | sort > out.txt && echo $(rm x)")
    >>> [c.argv for p in script.pipelines for c in p]
    [['grep', '>', 'a.txt'], ['sort'], ['echo', '$(rm x)']]
    >>> script.pipelines[0][1].redirects
    [Redirect(op='>', target='out.txt', fd='', body=None)]
    >>> script.substitutions
    ['rm x']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..errors import CtxnbError

__all__ = [
    "PIPES",
    "READ_REDIRECTIONS",
    "SEPARATORS",
    "WRITE_REDIRECTIONS",
    "Command",
    "Redirect",
    "Script",
    "ShellSyntaxError",
    "Token",
    "parse",
    "tokenize",
]


class ShellSyntaxError(CtxnbError, ValueError):
    """A command line a shell would refuse: an unbalanced quote, bracket or backtick, or
    a redirection with no target. A :class:`ValueError` too, as before it joined ctxnb's
    error root."""


@dataclass(frozen=True)
class Token:
    """One word or operator.

    Attributes:
        kind: ``"word"`` or ``"op"`` (a newline that ends a command is the op ``"\\n"``).
        text: a word after quote removal, or the operator.
        quoted: whether any part of the word was quoted or escaped.
        fd: for a redirection operator, the descriptor written just before it
            (``"2"`` in ``2>``), else ``""``.
        body: for the delimiter word of a here-document, the document's text.
    """

    kind: Literal["word", "op"]
    text: str
    quoted: bool = False
    fd: str = ""
    body: str | None = None


@dataclass(frozen=True)
class Redirect:
    """One redirection of a simple command.

    Attributes:
        op: the operator (``>``, ``>>``, ``<``, ``<<``, ``<<<``, ``&>``, ``>&`` …).
        target: the word after it (for a here-document, its delimiter).
        fd: the descriptor written before the operator (``"2"`` in ``2>``), or ``""``.
        body: the text fed to standard input by ``<<``, ``<<-`` and ``<<<``.
    """

    op: str
    target: str
    fd: str = ""
    body: str | None = None

    @property
    def writes_file(self) -> bool:
        """Whether the redirection opens the file ``target`` for writing (not ``2>&1``)."""
        if self.op not in WRITE_REDIRECTIONS:
            return False
        return not (self.op == ">&" and (self.target.isdigit() or self.target == "-"))


@dataclass
class Command:
    """A simple command: its argument list and its redirections, in order."""

    argv: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)

    @property
    def stdin_text(self) -> str | None:
        """The text a here-document or here-string feeds to the command, if any."""
        bodies = [r.body for r in self.redirects if r.body is not None]
        return bodies[-1] if bodies else None


@dataclass
class Script:
    """A parsed command line.

    Attributes:
        pipelines: the pipelines of the line (split at ``;``, ``&&``, ``||``, ``&``,
            newlines and parentheses), each a list of simple commands joined by ``|``.
        substitutions: the scripts that command and process substitutions run, in the
            order they appear (nested ones are found when the caller parses these).
    """

    pipelines: list[list[Command]] = field(default_factory=list)
    substitutions: list[str] = field(default_factory=list)


OPERATORS = sorted(
    "&& || ;;& ;; ;& |& &>> &> >> >| >& <& <<< <<- << <> | & ; < > ( )".split(),
    key=len,
    reverse=True,
)
SEPARATORS = frozenset({";", "&&", "||", "&", ";;", ";&", ";;&", "(", ")", "\n"})
PIPES = frozenset({"|", "|&"})
WRITE_REDIRECTIONS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
READ_REDIRECTIONS = frozenset({"<", "<&", "<<", "<<-", "<<<"})
_OP_CHARS = frozenset("|&;<>()")
# After these reserved words a command starts, so ``((`` opens an arithmetic command.
_COMMAND_WORDS = frozenset("if then else elif do while until ! { time for".split())
_ANSI_C = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_HEX = re.compile(r"[0-9A-Fa-f]+")


def tokenize(text: str) -> tuple[list[Token], list[str]]:
    """Split a command line into tokens; also return the scripts substitutions run.

    Raises:
        ShellSyntaxError: an unbalanced quote, parenthesis, brace or backtick.

    Example:
        >>> toks, subs = tokenize("echo $'\\\\x41\\\\tb' 2>&1 `date`")
        >>> [(t.kind, t.text, t.fd) for t in toks][1:4]
        [('word', 'A\\tb', ''), ('op', '>&', '2'), ('word', '1', '')]
        >>> subs
        ['date']
    """
    return _Lexer(text).run()


def parse(text: str) -> Script:
    """Group the tokens of a command line into pipelines of simple commands.

    Raises:
        ShellSyntaxError: the line cannot be tokenized, or a redirection has no target.

    Example:
        >>> s = parse("cat <<'EOF' > notes.md\\nhello $USER\\nEOF\\n")
        >>> c = s.pipelines[0][0]
        >>> c.argv, c.stdin_text, [r.target for r in c.redirects if r.writes_file]
        (['cat'], 'hello $USER\\n', ['notes.md'])
    """
    toks, substs = tokenize(text)
    pipelines: list[list[Command]] = []
    pipeline: list[Command] = []
    cmd = Command()
    pending: Token | None = None
    cond = False  # inside [[ … ]]: operators are words
    for tok in toks:
        if pending is not None:
            if tok.kind != "word":
                raise ShellSyntaxError(f"redirection {pending.text!r} has no target")
            body = tok.body
            if pending.text == "<<<":
                body = tok.text + "\n"
            cmd.redirects.append(Redirect(pending.text, tok.text, pending.fd, body))
            pending = None
            continue
        if cond:
            cmd.argv.append(tok.text)
            cond = not (tok.kind == "word" and tok.text == "]]" and not tok.quoted)
            continue
        if tok.kind == "word":
            if not cmd.argv and tok.text == "[[" and not tok.quoted:
                cond = True
            cmd.argv.append(tok.text)
        elif tok.text in WRITE_REDIRECTIONS or tok.text in READ_REDIRECTIONS:
            pending = tok
        elif tok.text in PIPES:
            pipeline.append(cmd)
            cmd = Command()
        else:  # a separator
            pipeline.append(cmd)
            pipelines.append(pipeline)
            pipeline, cmd = [], Command()
    if pending is not None:
        raise ShellSyntaxError(f"redirection {pending.text!r} has no target")
    pipeline.append(cmd)
    pipelines.append(pipeline)
    kept = [[c for c in p if c.argv or c.redirects] for p in pipelines]
    return Script([p for p in kept if p], substs)


class _Lexer:
    def __init__(self, s: str) -> None:
        self.s = s
        self.toks: list[Token] = []
        self.substs: list[str] = []
        self.word: list[str] = []
        self.in_word = False
        self.quoted = False
        # Here-documents opened on the current line: (token index, strip tabs).
        self.heredocs: list[tuple[int, bool]] = []
        self.heredoc_next: bool | None = None  # after << / <<-: the next word is a delimiter

    # -- words

    def flush(self) -> None:
        if self.in_word:
            self.toks.append(Token("word", "".join(self.word), self.quoted))
            if self.heredoc_next is not None:
                self.heredocs.append((len(self.toks) - 1, self.heredoc_next))
                self.heredoc_next = None
        self.word, self.in_word, self.quoted = [], False, False

    def add(self, text: str, *, quoted: bool = False) -> None:
        self.word.append(text)
        self.in_word = True
        self.quoted = self.quoted or quoted

    def at_command_start(self) -> bool:
        if self.in_word:
            return False
        if not self.toks:
            return True
        last = self.toks[-1]
        if last.kind == "op":
            return last.text in SEPARATORS or last.text in PIPES
        return last.text in _COMMAND_WORDS and not last.quoted

    # -- the scan

    def run(self) -> tuple[list[Token], list[str]]:
        s, n = self.s, len(self.s)
        i = 0
        while i < n:
            c = s[i]
            if c == "\\":
                if i + 1 < n and s[i + 1] == "\n":  # line continuation
                    i += 2
                    continue
                self.add(s[i + 1] if i + 1 < n else "\\", quoted=True)
                i += 2
            elif c == "'":
                j = s.find("'", i + 1)
                if j < 0:
                    raise ShellSyntaxError("unbalanced single quote")
                self.add(s[i + 1 : j], quoted=True)
                i = j + 1
            elif c == '"':
                i = self.double(i + 1)
            elif s.startswith("$'", i):
                text, i = _ansi_c(s, i + 2)
                self.add(text, quoted=True)
            elif s.startswith('$"', i):  # a translated string: the same as "…" here
                i = self.double(i + 2)
            elif c == "$" or c == "`":
                i = self.expansion(i)
            elif c in " \t":
                self.flush()
                i += 1
            elif c == "\n":
                self.flush()
                self.toks.append(Token("op", "\n"))
                i = self.heredoc_bodies(i + 1)
            elif c == "#" and not self.in_word:
                end = s.find("\n", i)
                i = n if end < 0 else end
            elif s.startswith("((", i) and self.at_command_start():
                j = _match_paren(s, i)
                if not s.startswith(")", j - 1) or j - 1 <= i + 1:
                    raise ShellSyntaxError("unbalanced arithmetic command")
                self.scan_inner(s[i + 2 : j - 1])
                self.add(s[i : j + 1])
                self.flush()
                i = j + 1
            elif c in "<>" and s.startswith("(", i + 1) and not self.in_word:
                j = _match_paren(s, i + 1)  # process substitution <(…) / >(…)
                self.substs.append(s[i + 2 : j])
                self.add(s[i : j + 1])
                i = j + 1
            elif c in _OP_CHARS:
                fd = ""
                if c in "<>" and self.in_word and not self.quoted and "".join(self.word).isdigit():
                    fd = "".join(self.word)  # "2>": the digits name a descriptor
                    self.word, self.in_word = [], False
                self.flush()
                op = next(o for o in OPERATORS if s.startswith(o, i))
                self.toks.append(Token("op", op, fd=fd))
                if op in ("<<", "<<-"):
                    self.heredoc_next = op == "<<-"
                i += len(op)
            else:
                self.add(c)
                i += 1
        self.flush()
        self.heredoc_bodies(n)
        return self.toks, self.substs

    def expansion(self, i: int) -> int:
        """An unquoted or double-quoted ``$…`` or backtick at ``i``: kept as written."""
        s = self.s
        if s.startswith("$((", i):  # arithmetic; substitutions inside it still run
            j = _match_paren(s, i + 1)
            self.scan_inner(s[i + 3 : j - 1])
        elif s.startswith("$(", i):
            j = _match_paren(s, i + 1)
            self.substs.append(s[i + 2 : j])
        elif s.startswith("${", i):
            j = _match_brace(s, i + 1)
            self.scan_inner(s[i + 2 : j])
        elif s[i] == "`":
            j = _backtick_end(s, i + 1)
            self.substs.append(_unescape_backticks(s[i + 1 : j]))
        else:
            self.add("$")
            return i + 1
        self.add(s[i : j + 1])
        return j + 1

    def double(self, i: int) -> int:
        """Read a ``"…"`` string whose text starts at ``i``; return the index after it."""
        s, n = self.s, len(self.s)
        self.add("", quoted=True)
        while i < n:
            c = s[i]
            if c == "\\" and i + 1 < n:
                nxt = s[i + 1]
                if nxt in '$`"\\':
                    self.add(nxt)
                elif nxt != "\n":
                    self.add(c + nxt)
                i += 2
            elif c == '"':
                return i + 1
            elif c == "$" or c == "`":
                i = self.expansion(i)
            else:
                self.add(c)
                i += 1
        raise ShellSyntaxError("unbalanced double quote")

    def scan_inner(self, text: str) -> None:
        """Collect the command substitutions inside ``${…}`` or an arithmetic text."""
        inner = _Lexer(text)
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
            elif c == "'":
                j = text.find("'", i + 1)
                i = len(text) if j < 0 else j + 1
            elif c == "$" or c == "`":
                i = inner.expansion(i)
            else:
                i += 1
        self.substs.extend(inner.substs)

    def heredoc_bodies(self, i: int) -> int:
        """Read the bodies of the here-documents opened on the line that just ended."""
        s = self.s
        for idx, strip_tabs in self.heredocs:
            delim = self.toks[idx]
            body, i = _heredoc_body(s, i, delim.text, strip_tabs)
            if not delim.quoted:  # an unquoted delimiter: the body is expanded
                body = self.expand_body(body)
            self.toks[idx] = Token("word", delim.text, delim.quoted, body=body)
        self.heredocs = []
        return i

    def expand_body(self, body: str) -> str:
        """Quote removal of an unquoted here-document body; records its substitutions."""
        inner = _Lexer(body)
        i = 0
        while i < len(body):
            c = body[i]
            if c == "\\" and i + 1 < len(body) and body[i + 1] in "$`\\\n":
                if body[i + 1] != "\n":
                    inner.add(body[i + 1])
                i += 2
            elif c == "$" or c == "`":
                i = inner.expansion(i)
            else:
                inner.add(c)
                i += 1
        self.substs.extend(inner.substs)
        return "".join(inner.word)


def _ansi_c(s: str, i: int) -> tuple[str, int]:
    """Decode a ``$'…'`` string whose text starts at ``i``; return it and the end index."""
    out: list[str] = []
    n = len(s)
    while i < n:
        c = s[i]
        if c == "'":
            return "".join(out).split("\0", 1)[0], i + 1  # bash stops a word at NUL
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        i += 2
        if e in _ANSI_C:
            out.append(_ANSI_C[e])
        elif e in "01234567":
            m = re.compile(r"[0-7]{1,3}").match(s, i - 1)
            assert m is not None
            out.append(_byte(int(m.group(), 8) & 0xFF))
            i = m.end()
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            m = _HEX.match(s[i : i + width])
            if not m:
                out.append("\\" + e)
                continue
            value = int(m.group(), 16)
            out.append(_byte(value) if e == "x" else chr(min(value, 0x10FFFF)))
            i += m.end()
        elif e == "c" and i < n:
            out.append(chr(ord(s[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    raise ShellSyntaxError("unbalanced $'…' quote")


def _byte(value: int) -> str:
    """One byte as bash emits it: ASCII as is, others as a lone (undecodable) byte."""
    return chr(value) if value < 0x80 else bytes([value]).decode("utf-8", "surrogateescape")


def _skip_quoted(s: str, i: int) -> int:
    """Index just after the quoted text (``'…'``, ``"…"``, ``$'…'``) that starts at ``i``."""
    if s[i] == "'":
        j = s.find("'", i + 1)
        if j < 0:
            raise ShellSyntaxError("unbalanced single quote")
        return j + 1
    if s.startswith("$'", i):
        return _ansi_c(s, i + 2)[1]
    i += 1  # a double quote
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif s.startswith("$(", i):
            i = _match_paren(s, i + 1) + 1
        elif s.startswith("${", i):
            i = _match_brace(s, i + 1) + 1
        elif c == "`":
            i = _backtick_end(s, i + 1) + 1
        else:
            i += 1
    raise ShellSyntaxError("unbalanced double quote")


_HEREDOC_OPEN = re.compile(r"<<(-?)[ \t]*((?:'[^']*'|\"[^\"]*\"|\\.|[^\s;&|<>()'\"])+)")
_QUOTE_PART = re.compile(r"'([^']*)'|\"([^\"]*)\"|\\(.)")


def _match_paren(s: str, open_idx: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_idx``, skipping quoted text,
    comments and here-document bodies (``$(cat <<'EOF' … EOF)`` holds any text)."""
    return _match_close(s, open_idx, "()")


def _match_brace(s: str, open_idx: int) -> int:
    """Index of the ``}`` closing the ``${`` whose brace is at ``open_idx``."""
    return _match_close(s, open_idx, "{}")


def _match_close(s: str, open_idx: int, pair: str) -> int:
    opener, closer = pair[0], pair[1]
    depth = 0
    i = open_idx
    heredocs: list[tuple[str, bool]] = []
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"" or s.startswith("$'", i):
            i = _skip_quoted(s, i)
            continue
        if c == "`":
            i = _backtick_end(s, i + 1) + 1
            continue
        if opener == "{" and s.startswith("$(", i):
            i = _match_paren(s, i + 1) + 1
            continue
        if c == "#" and (i == 0 or s[i - 1] in " \t\n;&|()"):
            end = s.find("\n", i)
            i = len(s) if end < 0 else end
            continue
        if s.startswith("<<", i) and not s.startswith("<<<", i):
            m = _HEREDOC_OPEN.match(s, i)
            if m:
                delim = _QUOTE_PART.sub(lambda q: q.group(1) or q.group(2) or q.group(3), m[2])
                heredocs.append((delim, m[1] == "-"))
                i = m.end()
                continue
        if c == "\n" and heredocs:
            i += 1
            for delim, strip_tabs in heredocs:
                i = _heredoc_body(s, i, delim, strip_tabs)[1]
            heredocs = []
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ShellSyntaxError("unbalanced parenthesis" if opener == "(" else "unbalanced ${…} brace")


def _heredoc_body(s: str, i: int, delim: str, strip_tabs: bool) -> tuple[str, int]:
    """The body of a here-document that starts at ``i``, and the index after its end."""
    lines: list[str] = []
    while i < len(s):
        end = s.find("\n", i)
        line = s[i:] if end < 0 else s[i:end]
        i = len(s) if end < 0 else end + 1
        if strip_tabs:
            line = line.lstrip("\t")
        if line == delim:
            break
        lines.append(line + "\n")
    return "".join(lines), i


def _backtick_end(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == "`":
            return i
        else:
            i += 1
    raise ShellSyntaxError("unbalanced backtick")


def _unescape_backticks(text: str) -> str:
    r"""Inside backticks a backslash quotes only ``$``, ````` and ``\``."""
    return re.sub(r"\\([$`\\])", r"\1", text)
