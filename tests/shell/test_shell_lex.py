"""The one shell lexer, compared with bash itself.

Each line of the table is run by a real ``bash`` in an empty temporary directory with an
empty ``PATH``: no program can start, so every simple command lands in bash's
``command_not_found_handle``, which logs its argument list and what it reads on standard
input. Redirections create their files in the directory. The lexer must find the same
argument lists, the same here-document text and the same written files. The lines only
quote, split and redirect; nothing in them runs a program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _needs import require

from ctxnb.shell.lex import ShellSyntaxError, parse, tokenize

_HANDLER = r"""command_not_found_handle() {
  local body=""
  IFS= read -r -d '' body
  { printf '%d\0' "$#"; printf '%s\0' "$@" "$body"; } >> "$CTXNB_LOG"
  return 0
}
"""

# Command names start with "cmd": no such program exists and none is a bash builtin.
TABLE = [
    "cmd a 'b c' \"d e\" f\\ g",
    'cmd "a\\"b" \'a\\b\' "a\\b" "\\$x" \'\\$x\' a\\\\b "a\\`b"',
    "cmd \"a\"'b'c \"\" '' x\\ ",
    "cmd $'a\\tb' $'\\x41\\101\\u00e9' $'it\\'s' $'\\cA' $'a\\0b' $'\\q'",
    "cmd $'\\xff' $'\\U0001F600' $\"translated\"",
    "cmd a#b '#c' # a comment; cmd2 not run",
    'cmd "a;b" \'c|d\' e\\&f "g>h" \'i<j\' k\\>l "(m)"',
    "cmd one;cmd two&&cmd three\ncmd four",
    "cmd a\\\nb \"c\\\nd\" 'e\\\nf'",
    "cmd a >out1 2>err1 b",
    "cmd a>out2 x2>out3",
    'cmd 2>>out4 x; cmd &>out5; cmd >"out 6"',
    "cmd x>|out7 1>out8 2>&1 >&out9",
    'cmd ">" \'out\' a\\>b ">>" c',
    "cmd 3>out10 12>out11",
    "cmd <<EOF\nline $'x' \"q\" \\$y \\\\z\nEOF",
    "cmd <<'EOF'\n$HOME \\$x \"q\"\nEOF",
    "cmd <<-EOF\n\tindented\n\t\tdeeper\n\tEOF",
    "cmd <<\\EOF > out12\nraw $x\nEOF",
    "cmd <<<\"here string\"; cmd2 <<<'x y'",
    "cmd <<A; cmd2 <<B\na $'b'\nA\nb\nB\ncmd3 after",
    "cmd <<EOF\ncontinued \\\nline\nEOF",
    "cmd <<EOF\nEOF ",
    "[[ b > a ]] && cmd cond-true; [[ a < b ]] && cmd cond2",
    "(( 3 > 2 )) && cmd arith",
    "cmd ')' '(' \"a)b\" 'it)s'",
    "cmd one; cmd two;",
    "  cmd   spaced\t\targs  ",
]


def _bash_run(line: str, tmp: Path) -> tuple[list[tuple[list[str], str]], set[str]]:
    """What bash does with a line: the commands it tries, with their stdin, and new files."""
    bash = shutil.which("bash")
    require(bash is not None, "bash")
    assert bash is not None
    log = tmp / "log"
    log.write_bytes(b"")
    work = tmp / "cwd"
    work.mkdir()
    env = {"PATH": str(tmp / "no-programs"), "CTXNB_LOG": str(log), "LC_ALL": "C.UTF-8"}
    subprocess.run(
        [bash, "--norc", "--noprofile", "-c", _HANDLER + line],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    text = log.read_bytes().decode("utf-8", "surrogateescape")
    fields = text.split("\0")[:-1]  # each call: its argc, its argv, its stdin text
    calls = []
    while fields:
        argc = int(fields[0])
        calls.append((fields[1 : 1 + argc], fields[1 + argc]))
        fields = fields[2 + argc :]
    return calls, set(os.listdir(work))


def _lexer_run(line: str) -> tuple[list[tuple[list[str], str]], set[str]]:
    script = parse(line)
    calls, files = [], set()
    for pipeline in script.pipelines:
        for cmd in pipeline:
            files.update(r.target for r in cmd.redirects if r.writes_file)
            if cmd.argv and cmd.argv[0].startswith("cmd"):
                calls.append((cmd.argv, cmd.stdin_text or ""))
    return calls, files


@pytest.mark.parametrize("line", TABLE)
def test_words_redirections_and_heredocs_match_bash(line: str, tmp_path: Path) -> None:
    bash_calls, bash_files = _bash_run(line, tmp_path)
    assert bash_calls, "bash ran none of the line's commands"
    calls, files = _lexer_run(line)
    assert sorted(calls) == sorted(bash_calls)
    assert files == bash_files


@pytest.mark.parametrize(
    "line",
    [
        "cmd 'a",
        'cmd "a',
        "cmd $(a",
        "cmd `a",
        "cmd $'a",
        "cmd ${a",
        "cmd >",
        "cmd a | > ;",
    ],
)
def test_lines_bash_refuses_are_refused(line: str) -> None:
    bash = shutil.which("bash")
    require(bash is not None, "bash")
    assert bash is not None
    # -n reads the line without running anything.
    checked = subprocess.run([bash, "-n", "-c", line], capture_output=True, check=False)
    assert checked.returncode != 0
    with pytest.raises(ShellSyntaxError):
        parse(line)


@pytest.mark.parametrize(
    ("line", "scripts"),
    [
        ("echo $(a) `b` <(c) >(d)", ["a", "b", "c", "d"]),
        ('echo "x $(a "q") y"', ['a "q"']),
        ("echo '$(not)' \\$(not) \"\\$(not)\"", []),
        ('echo "${x:-$(rm y)}"', ["rm y"]),
        ("echo ${x:-`rm y`}", ["rm y"]),
        ("echo $(( $(rm y) + 1 ))", ["rm y"]),
        ("(( x = $(rm y) ))", ["rm y"]),
        ("cat <<E\n$(rm y) `rm z`\nE", ["rm y", "rm z"]),
        ("cat <<'E'\n$(rm y)\nE", []),
        ("cat <<E\n\\$(not)\nE", []),
        ("echo `echo \\`rm y\\``", ["echo `rm y`"]),
        (
            "git commit -m \"$(cat <<'EOF'\nit's ) done\nEOF\n)\"",
            ["cat <<'EOF'\nit's ) done\nEOF\n"],
        ),
        ("echo $(ls # it's a comment\n)", ["ls # it's a comment\n"]),
        ("echo $(echo $(rm y))", ["echo $(rm y)"]),
    ],
)
def test_substitutions_are_listed(line: str, scripts: list[str]) -> None:
    assert parse(line).substitutions == scripts


def test_operators_inside_words_and_quotes() -> None:
    toks, _ = tokenize("a 2>f b>g '2'>h x2>i")
    assert [(t.kind, t.text, t.fd) for t in toks] == [
        ("word", "a", ""),
        ("op", ">", "2"),
        ("word", "f", ""),
        ("word", "b", ""),
        ("op", ">", ""),
        ("word", "g", ""),
        ("word", "2", ""),
        ("op", ">", ""),
        ("word", "h", ""),
        ("word", "x2", ""),
        ("op", ">", ""),
        ("word", "i", ""),
    ]


def test_pipelines_and_separators() -> None:
    script = parse("a | b |& c && d || e & f; (g) ;; h\ni")
    assert [[c.argv[0] for c in p] for p in script.pipelines] == [
        ["a", "b", "c"],
        ["d"],
        ["e"],
        ["f"],
        ["g"],
        ["h"],
        ["i"],
    ]


def test_heredoc_without_body_is_empty_and_here_string_ends_with_newline() -> None:
    assert parse("cat <<EOF").pipelines[0][0].stdin_text == ""
    assert parse("cat <<< 'a b'").pipelines[0][0].stdin_text == "a b\n"
    assert parse("cat < in.txt").pipelines[0][0].stdin_text is None


def test_descriptor_duplication_writes_no_file() -> None:
    cmd = parse("a 2>&1 >&- 1>&2 >&out").pipelines[0][0]
    assert [r.target for r in cmd.redirects if r.writes_file] == ["out"]
