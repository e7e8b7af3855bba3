"""git's ignore sources beyond the workspace's own ``.gitignore`` files, against git itself.

Every case builds a real repository with the git CLI, with HOME, XDG_CONFIG_HOME and
GIT_CONFIG_NOSYSTEM pointing into the test's directory so that no configuration of the
machine reaches either side. The references: ``git ls-files --others --exclude-standard``
(what the walk lists), ``git check-ignore`` (what search must never return), and
``git config --get-all`` (how a configuration file is read).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from _gitignore_cases import FILES, _random_line
from _needs import needs, require

from ctxnb.access._gitsources import config_values, git_sources
from ctxnb.access.ignore import IgnoredWorkspaceWarning, iter_tree
from ctxnb.tools.search import ripgrep_available, search

pytestmark = pytest.mark.usefixtures("isolated_git")
needs_rg = needs(ripgrep_available(), "ripgrep (rg)")

WS = "pkg/ws"  # the workspace, a subdirectory of the repository


@pytest.fixture
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own: git and ctxnb read their user configuration there."""
    require(shutil.which("git") is not None, "git")
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.delenv("GIT_DIR", raising=False)
    return home


def _git(cwd: Path, *args: str, check: bool = True, stdin: bytes | None = None) -> bytes:
    out = subprocess.run(
        ["git", "-c", "core.quotePath=false", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        check=check,
    )
    return out.stdout


def _repo(tmp_path: Path, files: list[str] = FILES, *, sub: str = WS) -> tuple[Path, Path]:
    """A repository with the files below ``sub``; returns (top, workspace)."""
    top = tmp_path / "repo"
    ws = top / sub
    for rel in files:
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("needle " + rel + "\n")
    if sub:
        (top / "pkg" / "sibling.txt").write_text("needle\n")
    _git(tmp_path, "init", "-q", str(top))
    return top, ws


def _git_listed(ws: Path) -> set[str]:
    out = _git(ws, "ls-files", "-z", "--others", "--exclude-standard")
    # git lists symbolic links too; they are never files of a ctxnb workspace.
    return {p for p in os.fsdecode(out).split("\0") if p and not (ws / p).is_symlink()}


def _ours(ws: Path) -> set[str]:
    return {rel for rel, _ in iter_tree(ws)}


def _write(path: Path, lines: list[str] | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = lines if isinstance(lines, bytes) else "\n".join(lines).encode() + b"\n"
    path.write_bytes(data)


def _rewrite_randomly(sources: list[Path], rng: random.Random) -> None:
    """Each ignore file removed, or written with one to four random lines."""
    for path in sources:
        path.unlink(missing_ok=True)
        if rng.random() < 0.6:
            _write(path, [_random_line(rng) for _ in range(rng.randint(1, 4))])


def _random_mismatches(
    ws: Path,
    sources: list[Path],
    rng: random.Random,
    cases: int,
    listed: Callable[[Path], set[str]] | None = None,
) -> list[tuple[int, dict[str, str], list[str], list[str]]]:
    """Random ignore files, each case's walk compared with git's listing."""
    out = []
    for n in range(cases):
        _rewrite_randomly(sources, rng)
        ours, git = _ours(ws), (listed or _git_listed)(ws)
        if ours != git:
            texts = {str(p): p.read_text() for p in sources if p.exists()}
            out.append((n, texts, sorted(ours - git), sorted(git - ours)))
    return out


def _assert_same(ws: Path) -> set[str]:
    ours, git = _ours(ws), _git_listed(ws)
    assert ours == git, f"only ctxnb: {sorted(ours - git)}; only git: {sorted(git - ours)}"
    return ours


# --------------------------------------------------------------------------- the walk


def test_each_source_applies_where_git_anchors_it(tmp_path: Path, isolated_git: Path) -> None:
    top, ws = _repo(tmp_path)
    _write(top / ".gitignore", ["/pkg/ws/ab", "*.log", "/b.py"])  # /b.py: only the top's
    _write(top / "pkg" / ".gitignore", ["ws/src/sub/", "/f.txt"])  # /f.txt: pkg/f.txt only
    _write(top / ".git" / "info" / "exclude", ["top.py"])
    _write(isolated_git / "my-ignore", ["*.o"])
    _git(top, "config", "core.excludesFile", "~/my-ignore")
    ours = _assert_same(ws)
    assert {"b.py", "f.txt", "a/b/f.txt"} <= ours  # anchored elsewhere: not these
    for gone in ["ab", "x.log", "src/sub/b.py", "top.py", "build/out.o"]:
        assert gone not in ours


def test_precedence_between_sources_is_gits(tmp_path: Path, isolated_git: Path) -> None:
    top, ws = _repo(tmp_path)
    # Lowest first: core.excludesFile < info/exclude < outer .gitignore < the workspace's.
    _write(isolated_git / ".config" / "git" / "ignore", ["*.py", "*.txt", "*.md", "ab"])
    _write(top / ".git" / "info" / "exclude", ["!*.py", "!ab"])
    _write(top / ".gitignore", ["*.py", "!star*.md"])
    _write(top / "pkg" / ".gitignore", ["!top.py"])
    _write(ws / ".gitignore", ["!a.py", "!src/", "!f.txt"])
    ours = _assert_same(ws)
    assert {"top.py", "src/a.py", "f.txt", "ab", "star*.md"} <= ours
    assert "b.py" not in ours and "sp ace.txt" not in ours


def test_global_and_repository_config_choose_the_excludes_file(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, ws = _repo(tmp_path)
    _write(isolated_git / ".config" / "git" / "ignore", ["*.py"])  # the default
    assert "b.py" not in _assert_same(ws)
    _write(isolated_git / "global-ignore", ["*.txt"])
    (isolated_git / ".gitconfig").write_text('[core]\n\texcludesFile = "~/global-ignore"\n')
    ours = _assert_same(ws)
    assert "b.py" in ours and "f.txt" not in ours  # set: the default no longer counts
    # The XDG file is read before ~/.gitconfig, so ~/.gitconfig's value wins over it.
    (isolated_git / ".config" / "git" / "config").write_text("[core]\nexcludesfile=~/nope\n")
    assert "f.txt" not in _assert_same(ws)
    # The repository's own configuration comes last and wins, read as data only; a
    # relative path is relative to the top of the repository, as git resolves it.
    _write(top / "repo-ignore", ["*.log"])
    (top / ".git" / "config").write_text(
        (top / ".git" / "config").read_text() + "[CORE]\n\tExcludesFile = repo-ignore\n"
    )
    ours = _assert_same(ws)
    assert "f.txt" in ours and "x.log" not in ours


def test_workspace_inside_an_ignored_directory_is_all_ignored(tmp_path: Path) -> None:
    top, ws = _repo(tmp_path)
    _write(top / ".gitignore", ["pkg/"])
    with pytest.warns(IgnoredWorkspaceWarning, match=r"git ignores 'pkg/' \(the line 'pkg/'\)"):
        assert _assert_same(ws) == set()
    _write(top / ".gitignore", ["pkg/", "!pkg/"])  # re-included: everything is back
    assert "top.py" in _assert_same(ws)


def test_the_ignored_workspace_warning_names_it_redacted(tmp_path: Path) -> None:
    # The directory's name and the ignore line are text an agent can write.
    token = "gh" + "p_" + "Ign0" + "k8Qz2Lw7Rt5Vx1Yb9Hd3Fs6Gj0Pm4Kc2"  # generated
    (tmp_path / "repo" / "pkg").mkdir(parents=True)  # _repo puts a sibling there
    top, ws = _repo(tmp_path, sub=f"{token}/ws")
    _write(top / ".gitignore", [f"{token}/"])
    with pytest.warns(IgnoredWorkspaceWarning) as seen:
        assert _assert_same(ws) == set()
    message = str(seen[0].message)
    assert "[REDACTED:github-token]" in message and token not in message, message


def test_use_gitignore_off_reads_no_git_source(tmp_path: Path, isolated_git: Path) -> None:
    top, ws = _repo(tmp_path)
    _write(top / ".gitignore", ["*.py"])
    _write(top / ".git" / "info" / "exclude", ["*.txt"])
    _write(isolated_git / ".config" / "git" / "ignore", ["*.log"])
    listed = {rel for rel, _ in iter_tree(ws, use_gitignore=False)}
    assert {"b.py", "f.txt", "x.log"} <= listed


@pytest.mark.filterwarnings("ignore::ctxnb.access.ignore.IgnoredWorkspaceWarning")  # random
@pytest.mark.parametrize("where", ["top", "subdirectory"])
def test_random_patterns_in_every_source_match_git(
    tmp_path: Path, isolated_git: Path, where: str
) -> None:
    top, ws = _repo(tmp_path, sub="" if where == "top" else WS)
    sources = [
        isolated_git / ".config" / "git" / "ignore",
        top / ".git" / "info" / "exclude",
        top / ".gitignore",
        top / "pkg" / ".gitignore",
        ws / ".gitignore",
        ws / "src" / ".gitignore",
    ]
    mismatches = _random_mismatches(ws, sources, random.Random(20251125 + len(where)), 150)
    assert not mismatches, mismatches[:2]


@pytest.mark.parametrize(
    ("lines", "kept", "gone"),
    [
        (b"*.py\r\n!top.py\r\n", {"top.py"}, {"b.py"}),  # CRLF
        (b"f.txt   \nab\\ \n", set(), {"f.txt"}),  # trailing spaces, escaped space
        (b"\\#hash\n\\!bang\n#x.log\n", {"x.log"}, {"#hash", "!bang"}),  # escaped # and !
        (b"**/deep\nsrc/**/*.py\n!src/sub/**/\n", {"src/sub/deep/c.txt"}, {"src/a.py"}),
        (b"**/deep/\nsrc/**/*.py\n!src/sub/*.py\n", {"src/sub/b.py"}, {"src/sub/deep/c.txt"}),
        (b"caf\xe9.txt\nq?.txt\n", {"caf\u00e9.txt"}, {"q?.txt"}),  # a non-UTF-8 line
        (b"\xef\xbb\xbfab\n", set(), {"ab"}),  # a byte-order mark
    ],
    ids=["crlf", "trailing-spaces", "escapes", "double-star", "dir-then-file", "non-utf8", "bom"],
)
@pytest.mark.parametrize("source", ["info-exclude", "excludes-file", "outer-gitignore"])
def test_hostile_lines_in_outer_sources(
    tmp_path: Path, isolated_git: Path, lines: bytes, kept: set[str], gone: set[str], source: str
) -> None:
    top, ws = _repo(tmp_path)
    target = {
        "info-exclude": top / ".git" / "info" / "exclude",
        "excludes-file": isolated_git / ".config" / "git" / "ignore",
        "outer-gitignore": top / ".gitignore",
    }[source]
    lines = lines.replace(b"src/", b"pkg/ws/src/")  # anchored at the repository's top
    _write(target, lines)
    ours = _assert_same(ws)
    assert kept <= ours and not gone & ours


def test_non_utf8_pattern_matches_a_non_utf8_name(tmp_path: Path, isolated_git: Path) -> None:
    top, ws = _repo(tmp_path, ["a.py"])
    name = os.fsdecode(b"caf\xe9.txt")
    (ws / name).write_bytes(b"x\n")
    (ws / "caf\u00e9.txt").write_bytes(b"x\n")
    _write(top / ".git" / "info" / "exclude", b"caf\xe9.txt\n")
    ours = _assert_same(ws)
    assert name not in ours and "caf\u00e9.txt" in ours


def test_symlinked_gitignore_files_are_not_read_as_in_git(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, ws = _repo(tmp_path)
    _write(tmp_path / "everything", ["*"])
    for d in (top, top / "pkg", ws, ws / "src"):
        (d / ".gitignore").symlink_to(tmp_path / "everything")
    ours = _assert_same(ws)
    assert {"top.py", "src/a.py"} <= ours


def test_a_symlinked_exclude_file_inside_the_workspace_is_not_followed(
    tmp_path: Path, isolated_git: Path
) -> None:
    # git follows it; ctxnb reads files inside the workspace without following links,
    # so a link planted in the workspace's .git cannot point ctxnb's reads elsewhere.
    top, _ = _repo(tmp_path)
    (top / ".git" / "info").mkdir(exist_ok=True)
    _write(tmp_path / "elsewhere", ["*.py"])
    (top / ".git" / "info" / "exclude").unlink(missing_ok=True)
    (top / ".git" / "info" / "exclude").symlink_to(tmp_path / "elsewhere")
    assert "pkg/ws/b.py" not in _git_listed(top)
    assert "pkg/ws/b.py" in _ours(top)
    # Outside the workspace (the workspace is a subdirectory) it is the host's: followed.
    assert "b.py" not in _assert_same(top / WS)


def test_a_linked_worktree_reads_the_common_exclude_file(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, _ = _repo(tmp_path, ["a.py", "b.txt"])
    _git(top, "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q",
         "--allow-empty", "-m", "empty")  # fmt: skip
    _git(top, "worktree", "add", "-q", str(tmp_path / "linked"))
    linked = tmp_path / "linked"
    _write(linked / WS / "c.py", ["x"])
    _write(linked / WS / "d.txt", ["x"])
    _write(top / ".git" / "info" / "exclude", ["*.txt"])
    assert (linked / ".git").is_file()
    assert _assert_same(linked / WS) == {"c.py"}


def test_nested_repository_is_decided_as_check_ignore_decides(
    tmp_path: Path, isolated_git: Path
) -> None:
    # ``git ls-files`` shows an untracked nested repository as one entry; ctxnb walks
    # into it, and decides each file as ``git check-ignore`` in the outer one does.
    top, ws = _repo(tmp_path, ["a.log", "nested/n.log", "nested/n.txt", "nested/k/m.py"])
    _git(ws, "init", "-q", "nested")
    _write(top / ".gitignore", ["*.log", "k/"])
    _write(ws / "nested" / ".gitignore", ["!n.log"])
    _write(ws / "nested" / ".git" / "info" / "exclude", ["*.txt"])
    every = ["a.log", "nested/n.log", "nested/n.txt", "nested/k/m.py", "nested/.gitignore"]
    ignored = _check_ignore(ws, every)
    assert ignored == {"a.log", "nested/k/m.py"}
    assert _ours(ws) == set(every) - ignored


def _check_ignore(ws: Path, paths: list[str]) -> set[str]:
    out = _git(ws, "check-ignore", "--stdin", "-z", stdin="\0".join(paths).encode(), check=False)
    return {p for p in os.fsdecode(out).split("\0") if p}


# --------------------------------------------------------------------------- search


@pytest.mark.parametrize("backend", ["python", pytest.param("ripgrep", marks=needs_rg)])
def test_search_never_returns_what_git_ignores(
    tmp_path: Path, isolated_git: Path, backend: str
) -> None:
    top, ws = _repo(tmp_path)
    _write(top / ".gitignore", ["*.log", "/pkg/ws/d/e/", "!pkg/ws/logs/2024/*.log"])
    _write(top / "pkg" / ".gitignore", ["ws/src/sub/*", "!ws/src/sub/deep/"])
    _write(top / ".git" / "info" / "exclude", ["top.py", "build/"])
    _write(isolated_git / ".config" / "git" / "ignore", ["*.md", "#hash"])
    _write(tmp_path / "everything", ["*"])
    (ws / "a" / ".gitignore").symlink_to(tmp_path / "everything")  # not read, as in git
    _write(ws / ".gitignore", ["\\#hash", "!build/keep.txt"])
    _git(ws, "init", "-q", "d")  # a nested repository
    every = sorted(FILES)
    hits = {m.path for m in search(ws, "needle", backend=backend)}  # type: ignore[arg-type]
    ignored = _check_ignore(ws, every)
    assert hits == set(every) - ignored
    assert {"a/b/f.txt", "logs/2024/b.log"} <= hits  # the symlinked .gitignore did nothing
    assert {"x.log", "top.py", "d/e/f.txt", "src/sub/b.py", "#hash", "star*.md"} <= ignored


@pytest.mark.filterwarnings("ignore::ctxnb.access.ignore.IgnoredWorkspaceWarning")  # random
@needs_rg
def test_both_backends_agree_with_check_ignore_on_random_sources(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, ws = _repo(tmp_path)
    sources = [
        isolated_git / ".config" / "git" / "ignore",
        top / ".git" / "info" / "exclude",
        top / ".gitignore",
        ws / ".gitignore",
        ws / "src" / ".gitignore",
    ]
    rng = random.Random(7)
    every = sorted(FILES)
    bad = []
    for n in range(60):
        _rewrite_randomly(sources, rng)
        expected = set(every) - _check_ignore(ws, every)
        for backend in ("python", "ripgrep"):
            hits = {m.path for m in search(ws, "needle", backend=backend)}  # type: ignore[arg-type]
            if hits != expected:
                bad.append((n, backend, sorted(hits - expected), sorted(expected - hits)))
    assert not bad, bad[:3]


@needs_rg
def test_search_in_an_ignored_workspace_finds_nothing(tmp_path: Path) -> None:
    top, ws = _repo(tmp_path)
    _write(top / ".gitignore", ["/pkg/ws/"])
    for backend in ("python", "ripgrep"):
        with pytest.warns(IgnoredWorkspaceWarning, match="use_gitignore = false"):
            assert search(ws, "needle", backend=backend) == []  # type: ignore[arg-type]


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "text",
    [
        '[core]\n\texcludesFile = "~/a b"  ; comment\n',
        "[core]\nexcludesfile=plain # comment\n[core]\nEXCLUDESFILE = last\n",
        "[Core] excludesFile = x\\\n  y\n",
        '[core "sub"]\nexcludesFile = not-this\n[core.sub]\nexcludesFile = nor-this\n',
        '[core]\n\texcludesFile = "tab\\there\\\\\\"q\\"" \n',
        "[user]\nexcludesFile = other-section\n[core]\n  excludesFile  =   spaced  out  \n",
        "# only a comment\n[core]\n; excludesFile = commented\n",
        "\ufeff[core]\nexcludesFile = after-bom\n",
        '[core]\nexcludesFile = a"b ; c"d\n',
    ],
)
def test_config_values_as_git_reads_them(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    out = subprocess.run(
        ["git", "config", "--file", str(path), "--get-all", "core.excludesFile"],
        capture_output=True,
    )
    expected = out.stdout.decode().split("\n")[:-1] if out.returncode == 0 else []
    assert config_values(text.encode(), "core", "excludesfile") == expected


def test_random_config_files_read_as_git_reads_them(tmp_path: Path) -> None:
    # Random texts from config syntax's awkward pieces; those git accepts must give
    # git's own values.
    pieces = ["[core]", "[Core]", '[core "x"]', "[user]", "\n", "\n", " ", "\t", "=", " = "]
    pieces += ["excludesFile", "EXCLUDESFILE", "name", "a", "b c", '"', '\\"', "\\\\", "\\n"]
    pieces += ["\\t", "\\\n", "#", ";", "x#y", " ; c", "~/p", "\r\n", "ab-c"]
    rng = random.Random(3)
    path = tmp_path / "config"
    compared, bad = 0, []
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14)))
        path.write_text(text)
        out = subprocess.run(
            ["git", "config", "-z", "--file", str(path), "--get-all", "core.excludesFile"],
            capture_output=True,
        )
        if out.returncode not in (0, 1):
            continue  # git refuses the file
        compared += 1
        expected = out.stdout.decode().split("\0")[:-1]
        if config_values(text.encode(), "core", "excludesfile") != expected:
            bad.append(text)
    assert compared > 50 and not bad, bad[:5]


def test_no_repository_still_reads_the_users_excludes_file(
    tmp_path: Path, isolated_git: Path
) -> None:
    ws = tmp_path / "plain"
    _write(ws / "a.py", ["x"])
    _write(ws / "b.swp", ["x"])
    _write(isolated_git / ".config" / "git" / "ignore", ["*.swp"])
    src = git_sources(ws, read_inside=lambda rel: None)
    assert src.prefix == "" and [lines[:1] for _, lines in src.files] == [["*.swp"]]
    assert _ours(ws) == {"a.py"}


@pytest.mark.filterwarnings("ignore::ctxnb.access.ignore.IgnoredWorkspaceWarning")  # random
def test_deciding_one_path_agrees_with_the_walk_and_git(tmp_path: Path, isolated_git: Path) -> None:
    # TreeIgnores.decide answers for one path without a walk (the sandbox's commit
    # asks it which committed files the index leaves out): the same answers as git.
    from ctxnb.access.fdio import PathPolicy
    from ctxnb.access.ignore import TreeIgnores
    from ctxnb.errors import CtxnbError

    top, ws = _repo(tmp_path)
    policy = PathPolicy([ws])

    def read(rel: str) -> bytes | None:
        try:
            return policy.read_bytes(rel)
        except CtxnbError:
            return None

    sources = [top / ".git" / "info" / "exclude", top / ".gitignore", ws / ".gitignore"]
    sources += [ws / "src" / ".gitignore", ws / "src" / "sub" / ".gitignore"]
    rng = random.Random(11)
    bad = []
    for n in range(80):
        _rewrite_randomly(sources, rng)
        git = _git_listed(ws)
        tree = TreeIgnores(root=ws)
        ours = {rel for rel in [*FILES, ".gitignore"] if (ws / rel).exists()}
        ours = {rel for rel in ours if not tree.decide(rel, read)}
        expected = {rel for rel in git if not rel.endswith(".gitignore") or rel == ".gitignore"}
        ours = {rel for rel in ours if not rel.endswith(".gitignore") or rel == ".gitignore"}
        if ours != expected:
            texts = {str(p.relative_to(tmp_path)): p.read_text() for p in sources if p.exists()}
            bad.append((n, texts, sorted(ours - expected), sorted(expected - ours)))
    assert not bad, bad[:3]


# --------------------------------------------------------------------------- a user's path


def test_a_workspace_in_a_subdirectory_through_the_public_api(
    tmp_path: Path, isolated_git: Path
) -> None:
    from ctxnb import Workspace

    top, ws_dir = _repo(tmp_path, ["app.py", "debug.log", "notes.orig", "src/m.py", "tmp.swp"])
    _write(top / ".gitignore", ["*.log", "/pkg/ws/src/"])
    _write(top / ".git" / "info" / "exclude", ["*.orig"])
    _write(isolated_git / "ignore-these", ["*.swp"])
    (isolated_git / ".gitconfig").write_text("[core]\n\texcludesFile = ~/ignore-these\n")
    expected = _assert_same(ws_dir)
    assert expected == {"app.py"}
    ws = Workspace.open(ws_dir)
    try:
        report = ws.index(progress=False)
        assert report.files == 1
        tools = ws.tools(ws.session("ignores", rules=False))
        assert {hit["path"] for hit in tools.search("needle")} == expected
        assert tools.glob("**/*") == ["app.py"]
    finally:
        ws.close()


@needs_rg
def test_ripgrep_over_many_directory_runs_finds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxnb.tools import _ripgrep as ripgrep_module

    _, ws = _repo(tmp_path)
    _write(ws / ".gitignore", ["*.log", "d/e/"])
    one_run = search(ws, "needle", backend="ripgrep")
    monkeypatch.setattr(ripgrep_module, "_RG_ARGS_BUDGET", 40)  # a run per directory or two
    assert search(ws, "needle", backend="ripgrep") == one_run
    assert one_run == search(ws, "needle", backend="python")
    assert {m.path for m in one_run} == set(FILES) - _check_ignore(ws, FILES)


def test_a_fifo_or_device_named_as_excludes_file_is_not_read(
    tmp_path: Path, isolated_git: Path
) -> None:
    # The repository's config is data the agent may have written: a FIFO or a device
    # named there must not hang or flood the walk.
    top, ws = _repo(tmp_path, ["a.py", "b.txt"])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (str(fifo), "/dev/zero"):
        _git(top, "config", "core.excludesFile", target)
        assert _ours(ws) == {"a.py", "b.txt"}


def test_discovery_stops_at_a_ceiling_directory_as_git_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, ws = _repo(tmp_path, ["a.py", "b.log"])
    _write(top / ".gitignore", ["*.log"])
    assert _assert_same(ws) == {"a.py"}
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(top / "pkg"))
    # git finds no repository now; ctxnb no repository's ignores.
    failed = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ws, capture_output=True)
    assert failed.returncode != 0
    assert _ours(ws) == {"a.py", "b.log"}


# --------------------------------------------------------------------------- tracked files

TRACKED = ["x.log", "build/out.o", "logs/2024/b.log", "src/sub/deep/c.txt", "d/e/g/h.py"]


def _commit(top: Path, paths: list[str]) -> None:
    _git(top, "add", "-f", "--", *paths)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    _git(top, *ident, "commit", "-q", "-m", "tracked")


def _read_or_none(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() and not path.is_symlink() else None


def _git_files(ws: Path) -> set[str]:
    out = _git(ws, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return {p for p in os.fsdecode(out).split("\0") if p and (ws / p).is_file()}


@pytest.mark.filterwarnings("ignore::ctxnb.access.ignore.IgnoredWorkspaceWarning")  # random
@pytest.mark.parametrize("sub", ["", WS])
def test_tracked_files_are_never_ignored_as_in_git(
    tmp_path: Path, isolated_git: Path, sub: str
) -> None:
    top, ws = _repo(tmp_path, sub=sub)
    _commit(top, [f"{sub}/{p}" if sub else p for p in TRACKED])
    sources = [top / ".git" / "info" / "exclude", top / ".gitignore", ws / ".gitignore"]
    sources += [ws / "src" / ".gitignore", ws / "d" / ".gitignore"]
    _write(ws / ".gitignore", ["*.log", "build/", "src/", "d/e/"])
    fixed = _ours(ws)
    assert fixed == _git_files(ws)
    from ctxnb.access.ignore import TreeIgnores

    tree = TreeIgnores(root=ws)  # one path at a time, as the sandbox's commit asks
    assert {p for p in FILES if not tree.decide(p, lambda rel: _read_or_none(ws / rel))} == (
        fixed - {".gitignore"}
    )
    assert set(TRACKED) <= fixed and "logs/a.log" not in fixed and "src/a.py" not in fixed
    bad = _random_mismatches(ws, sources, random.Random(5 + len(sub)), 120, _git_files)
    assert not bad, bad[:3]


@pytest.mark.parametrize("backend", ["python", pytest.param("ripgrep", marks=needs_rg)])
def test_search_finds_tracked_files_in_ignored_directories(
    tmp_path: Path, isolated_git: Path, backend: str
) -> None:
    top, ws = _repo(tmp_path)
    _commit(top, [f"{WS}/{p}" for p in TRACKED])
    _write(top / ".gitignore", ["*.log", "build/", "/pkg/ws/src/", "/pkg/"])  # ws ignored too
    with pytest.warns(IgnoredWorkspaceWarning):
        hits = {m.path for m in search(ws, "needle", backend=backend)}  # type: ignore[arg-type]
    assert hits == set(FILES) - _check_ignore(ws, sorted(FILES))
    assert hits == set(TRACKED)


@pytest.mark.parametrize(
    "setup",
    [
        [],
        [["update-index", "--index-version", "4"]],
        [["update-index", "--index-version", "3"], ["update-index", "--skip-worktree", "ab"]],
        [["add", "-N", "--", "new file.txt"]],
    ],
    ids=["v2", "v4", "v3-extended", "intent-to-add"],
)
def test_index_paths_match_git_ls_files(tmp_path: Path, setup: list[list[str]]) -> None:
    from ctxnb.access._gitindex import tracked_paths

    top, _ = _repo(tmp_path, sub="")
    (top / "new file.txt").write_text("x\n")
    _commit(top, [p for p in FILES if p != "café.txt"] + ["café.txt"])
    for args in setup:
        _git(top, *args)
    expected = {p for p in os.fsdecode(_git(top, "ls-files", "-z")).split("\0") if p}
    assert tracked_paths((top / ".git" / "index").read_bytes()) == expected


def test_sha256_and_split_indexes(tmp_path: Path, isolated_git: Path) -> None:
    from ctxnb.access._gitindex import tracked_paths

    top = tmp_path / "sha256"
    _git(tmp_path, "init", "-q", "--object-format=sha256", str(top))  # git >= 2.29
    _write(top / "a.log", ["x"])
    _write(top / ".gitignore", ["*.log"])
    _commit(top, ["a.log"])
    assert tracked_paths((top / ".git" / "index").read_bytes(), hash_size=32) == {"a.log"}
    assert _ours(top) == _git_files(top) == {"a.log", ".gitignore"}
    # A split index keeps entries in a shared file this reader does not follow: then
    # the patterns alone decide (the tracked a.log is ignored, unlike in git).
    _git(top, "update-index", "--split-index")
    assert tracked_paths((top / ".git" / "index").read_bytes(), hash_size=32) is None
    assert _ours(top) == {".gitignore"}


def test_ctxnbs_own_ignores_still_apply_to_tracked_files(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, ws = _repo(tmp_path, sub="")
    _commit(top, TRACKED)
    _write(ws / ".gitignore", ["*.log", "build/", "src/"])
    assert set(TRACKED) <= _ours(ws)
    _write(ws / "src" / ".ctxnbignore", ["deep/"])  # a tracked file's directory
    listed = {rel for rel, _ in iter_tree(ws, extra_ignores=["x.log"])}
    assert "x.log" not in listed and "src/sub/deep/c.txt" not in listed
    assert {"build/out.o", "logs/2024/b.log", "d/e/g/h.py"} <= listed


@pytest.mark.parametrize("order", ["include-last", "include-first"])
def test_includes_in_the_users_config_are_read_where_they_stand(
    tmp_path: Path, isolated_git: Path, order: str
) -> None:
    top, ws = _repo(tmp_path, ["a.py", "b.txt", "c.log"])
    _write(isolated_git / "py-ignore", ["*.py"])
    _write(isolated_git / "txt-ignore", ["*.txt"])
    (isolated_git / "conf").mkdir()
    (isolated_git / "conf" / "extra.cfg").write_text("[core]\nexcludesFile = ~/txt-ignore\n")
    lines = ["[core]\n\texcludesFile = ~/py-ignore\n", "[include]\n\tpath = conf/extra.cfg\n"]
    if order == "include-first":
        lines.reverse()
    (isolated_git / ".gitconfig").write_text("".join(lines))
    kept = _assert_same(ws)
    assert kept == ({"a.py", "c.log"} if order == "include-last" else {"b.txt", "c.log"})


def test_includes_in_the_repositorys_config_are_followed_as_git_does(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, _ = _repo(tmp_path, ["a.py", "b.txt", "c.log"], sub="")
    _write(tmp_path / "elsewhere.cfg", ["[core]", "excludesFile = " + str(tmp_path / "ig")])
    _write(tmp_path / "ig", ["*.py"])
    _git(top, "config", "include.path", str(tmp_path / "elsewhere.cfg"))
    assert _assert_same(top) == {"b.txt", "c.log"}
    # Relative to the including file: .git/txt.cfg.
    _write(top / ".git" / "txt.cfg", ["[core]", "excludesFile = " + str(tmp_path / "ig2")])
    _write(tmp_path / "ig2", ["*.txt"])
    _git(top, "config", "includeIf.gitdir:" + str(top) + "/.git.path", "txt.cfg")
    assert _assert_same(top) == {"a.py", "c.log"}


def _global_include_if(home: Path, condition: str, ignore: str) -> None:
    """~/.gitconfig with one includeIf whose file sets core.excludesFile."""
    _write(home / "inc" / "ignore.cfg", ["[core]", "\texcludesFile = ~/" + ignore])
    (home / ".gitconfig").write_text(f'[includeIf "{condition}"]\n\tpath = inc/ignore.cfg\n')


@pytest.mark.parametrize(
    ("condition", "applies"),
    [
        ("gitdir:{top}/", True),  # a trailing slash: everything below
        ("gitdir:{top}/.git", True),
        ("gitdir:repo/", True),  # relative: **/ in front
        ("gitdir:~/../repo/", False),  # from the home; git does not resolve ".."
        ("gitdir/i:{TOP}/", True),  # case-folded
        ("gitdir:{TOP}/", False),  # not case-folded
        ("gitdir:elsewhere/", False),
        ("gitdir:./../", False),  # relative to the including file; ".." stays literal
        ("onbranch:main", True),
        ("onbranch:ma*", True),
        ("onbranch:other", False),
        ("onbranch:feature/", False),  # main is not below feature/
        ("hasconfig:remote.*.url:https://nowhere/**", False),  # no remote, in git either
        ("unknown:x", False),
    ],
)
def test_include_if_conditions_decide_as_git_decides(
    tmp_path: Path, isolated_git: Path, condition: str, applies: bool
) -> None:
    top, ws = _repo(tmp_path, ["a.py", "b.txt"])
    _git(top, "symbolic-ref", "HEAD", "refs/heads/main")
    _write(isolated_git / "py-ignore", ["*.py"])
    cond = condition.format(top=top, TOP=str(top).upper())
    _global_include_if(isolated_git, cond, "py-ignore")
    assert _assert_same(ws) == ({"b.txt"} if applies else {"a.py", "b.txt"})


def test_include_if_onbranch_follows_the_checked_out_branch(
    tmp_path: Path, isolated_git: Path
) -> None:
    top, ws = _repo(tmp_path, ["a.py", "b.txt"])
    _write(isolated_git / "py-ignore", ["*.py"])
    _global_include_if(isolated_git, "onbranch:release/**", "py-ignore")
    _git(top, "symbolic-ref", "HEAD", "refs/heads/release/1.0")
    assert _assert_same(ws) == {"b.txt"}
    _git(top, "symbolic-ref", "HEAD", "refs/heads/main")
    assert _assert_same(ws) == {"a.py", "b.txt"}


def test_include_if_gitdir_of_a_linked_worktree(tmp_path: Path, isolated_git: Path) -> None:
    top, _ = _repo(tmp_path, ["a.py", "b.txt"], sub="")
    _git(top, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "c", "--allow-empty")
    linked = tmp_path / "linked"
    _git(top, "worktree", "add", "-q", str(linked))
    _write(linked / "d.py", ["x"])
    _write(isolated_git / "py-ignore", ["*.py"])
    # A linked worktree's git directory is .git/worktrees/linked in the main one.
    _global_include_if(isolated_git, "gitdir:**/.git/worktrees/*", "py-ignore")
    assert "d.py" not in _assert_same(linked)
    assert "a.py" in _assert_same(top)


def test_include_cycles_and_depth_are_bounded(tmp_path: Path, isolated_git: Path) -> None:
    top, ws = _repo(tmp_path, ["a.py"])
    (isolated_git / ".gitconfig").write_text("[include]\n\tpath = ~/.gitconfig\n")
    assert "a.py" in _ours(ws)  # git refuses the loop; ctxnb stops at git's depth


@pytest.mark.parametrize("condition", ["gitdir:~/repo/", "gitdir:./repo/"])
def test_include_if_gitdir_from_the_home_and_the_including_file(
    tmp_path: Path, isolated_git: Path, condition: str
) -> None:
    # The repository in the home, the includeIf in ~/.gitconfig: "~/" and "./" both
    # name the home.
    top, ws = _repo(isolated_git, ["a.py", "b.txt"], sub="")
    _write(isolated_git / "py-ignore", ["*.py"])
    _global_include_if(isolated_git, condition, "py-ignore")
    assert _assert_same(ws) == {"b.txt"}
