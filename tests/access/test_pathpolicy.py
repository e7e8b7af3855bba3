"""Tests for ctxnb.access: the hostile-path corpus, the race-free walk, atomic writes."""

from __future__ import annotations

import doctest
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _needs import require
from _paths import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxnb.access.fdio as pathpolicy_mod
import ctxnb.access.pathrules as rules_mod
from ctxnb.access.fdio import PathPolicy
from ctxnb.access.pathrules import DEFAULT_DENY, TEMP_PREFIX, SafePath
from ctxnb.errors import ConfigError, NotFoundError, PolicyError

SECRET = b"TOP SECRET outside the workspace"


@dataclass
class Env:
    tmp: Path
    ws: Path
    outside: Path
    evil: Path
    policy: PathPolicy


def _snapshot(top: Path) -> dict[str, tuple[str, object]]:
    """Every entry under ``top`` without following links: kind plus content or target."""
    out: dict[str, tuple[str, object]] = {}

    def walk(d: Path) -> None:
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            rel = os.path.relpath(entry.path, top)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(entry.path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
                walk(Path(entry.path))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", Path(entry.path).read_bytes())
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode))

    walk(top)
    return out


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    evil = tmp_path / "ws_evil"
    for d in (ws / "sub", ws / "home", ws / ".git", ws / ".ctxnb" / "store", outside / "d", evil):
        d.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "d" / "secret.txt").write_bytes(SECRET)
    (evil / "secret.txt").write_bytes(SECRET)
    (ws / "inside.txt").write_bytes(b"inside")
    (ws / "sub" / "f.txt").write_bytes(b"sub file")
    # Denied files exist and hold data, so a refusal is the policy's doing, not ENOENT.
    for rel in [
        ".git/config",
        ".env",
        ".env.local",
        "sub/key.pem",
        "home/id_rsa",
        "home/id_ed25519.pub",
        ".ctxnb/store/x.parquet",
    ]:
        (ws / rel).write_bytes(SECRET)
    os.symlink(outside / "secret.txt", ws / "link_out")
    os.symlink(outside, ws / "linkdir")
    os.symlink(ws / "chain2", ws / "chain1")
    os.symlink(outside / "secret.txt", ws / "chain2")
    os.symlink("inside.txt", ws / "inlink")
    os.symlink("sub", ws / "insubdirlink")
    os.symlink(outside / "new.txt", ws / "dangling")
    os.symlink("/dev/null", ws / "devnull")
    os.symlink(".git", ws / "gitalias")
    os.mkfifo(ws / "fifo")
    # AF_UNIX paths are limited to ~108 bytes; bind relative to the workspace.
    monkeypatch.chdir(ws)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("sock")
    monkeypatch.chdir(tmp_path)
    try:
        yield Env(tmp_path, ws, outside, evil, PathPolicy([ws]))
    finally:
        sock.close()


P = Callable[[Env], str]

# (id, path builder, acceptable rules). Every case must be refused with PATH_DENIED by
# check, read_bytes, write_bytes_atomic and delete, and leave the disk untouched.
HOSTILE: list[tuple[str, P, tuple[str, ...]]] = [
    ("dotdot", lambda e: "../outside/secret.txt", ("traversal",)),
    ("dotdot-bare", lambda e: "..", ("traversal",)),
    ("dotdot-slash", lambda e: "../", ("traversal",)),
    ("a-dotdot-dotdot", lambda e: "a/../../outside/secret.txt", ("traversal",)),
    ("dot-dotdot", lambda e: "./../outside/secret.txt", ("traversal",)),
    ("sub-dotdot", lambda e: "sub/../inside.txt", ("traversal",)),
    ("trailing-dotdot", lambda e: "sub/..", ("traversal",)),
    ("abs-dotdot", lambda e: f"{e.ws}/../outside/secret.txt", ("traversal",)),
    ("abs-outside", lambda e: str(e.outside / "secret.txt"), ("outside-roots",)),
    ("abs-etc-passwd", lambda e: "/etc/passwd", ("outside-roots",)),
    ("abs-root", lambda e: "/", ("outside-roots",)),
    ("double-slash-abs", lambda e: "//etc/passwd", ("outside-roots",)),
    ("sibling-prefix", lambda e: str(e.evil / "secret.txt"), ("outside-roots",)),
    ("sibling-prefix-dir", lambda e: f"{e.ws}_evil", ("outside-roots",)),
    ("nul", lambda e: "inside.txt\x00.png", ("nul-byte",)),
    ("nul-only", lambda e: "\x00", ("nul-byte",)),
    ("newline", lambda e: "a\nb", ("control-char",)),
    ("escape-seq", lambda e: "\x1b[31mred", ("control-char",)),
    ("bidi-override", lambda e: "\u202etxt.exe", ("control-char",)),
    ("empty", lambda e: "", ("empty",)),
    ("blank", lambda e: "   ", ("empty",)),
    ("blank-name", lambda e: " /inside.txt", ("empty",)),
    ("tilde", lambda e: "~", ("home-tilde",)),
    ("tilde-slash", lambda e: "~/.ssh/id_rsa", ("home-tilde",)),
    ("tilde-user", lambda e: "~root/.bashrc", ("home-tilde",)),
    # The canonical form would lead with '~': refused too, so a rel re-checks the same.
    ("tilde-dot", lambda e: "./~", ("home-tilde",)),
    ("tilde-dot-slashes", lambda e: ".//~x/y", ("home-tilde",)),
    ("tilde-absolute", lambda e: str(e.ws / "~x"), ("home-tilde",)),
    ("tilde-fullwidth-dot", lambda e: "./\uff5e", ("home-tilde",)),
    ("backslash-traversal", lambda e: "..\\outside\\secret.txt", ("backslash",)),
    ("backslash-sub", lambda e: "sub\\f.txt", ("backslash",)),
    ("backslash-git", lambda e: ".git\\config", ("backslash",)),
    ("symlink-file-out", lambda e: "link_out", ("symlink",)),
    ("symlink-abs", lambda e: str(e.ws / "link_out"), ("symlink",)),
    ("symlinked-parent", lambda e: "linkdir/secret.txt", ("symlink",)),
    ("symlinked-parent-deep", lambda e: "linkdir/d/secret.txt", ("symlink",)),
    ("symlinked-dir-slash", lambda e: "linkdir/", ("symlink", "trailing-slash")),
    ("symlink-chain", lambda e: "chain1", ("symlink",)),
    ("symlink-in-root", lambda e: "inlink", ("symlink",)),
    ("symlink-in-root-dir", lambda e: "insubdirlink/f.txt", ("symlink",)),
    ("symlink-to-denied-dir", lambda e: "gitalias/config", ("symlink",)),
    ("dangling-symlink-out", lambda e: "dangling", ("symlink",)),
    ("dev-null-via-symlink", lambda e: "devnull", ("symlink",)),
    ("fifo", lambda e: "fifo", ("special-file",)),
    ("unix-socket", lambda e: "sock", ("special-file",)),
    ("long-component", lambda e: "a" * 256, ("component-too-long",)),
    ("long-component-utf8", lambda e: "é" * 128, ("component-too-long",)),
    ("long-path", lambda e: "/".join(["d" * 100] * 41), ("path-too-long",)),
    ("git-config", lambda e: ".git/config", ("deny:.git",)),
    ("git-dir", lambda e: ".git", ("deny:.git",)),
    ("git-nested", lambda e: "sub/.git/HEAD", ("deny:.git",)),
    ("git-upper", lambda e: ".GIT/config", ("deny:.git",)),
    ("git-trailing-space", lambda e: ".git /config", ("deny:.git",)),
    ("env", lambda e: ".env", ("deny:.env*",)),
    ("env-local", lambda e: ".env.local", ("deny:.env*",)),
    ("env-nested", lambda e: "sub/.env.production", ("deny:.env*",)),
    ("env-case", lambda e: ".Env", ("deny:.env*",)),
    ("env-trailing-dot", lambda e: ".env.", ("deny:.env*",)),
    ("env-dir-slash", lambda e: ".env/", ("deny:.env*",)),
    ("env-fullwidth-e", lambda e: ".\uff45nv", ("deny:.env*",)),
    ("pem", lambda e: "sub/key.pem", ("deny:**/*.pem",)),
    ("pem-upper", lambda e: "SUB/KEY.PEM", ("deny:**/*.pem",)),
    ("id-rsa", lambda e: "home/id_rsa", ("deny:**/id_*",)),
    ("id-rsa-upper", lambda e: "home/ID_RSA", ("deny:**/id_*",)),
    ("id-ed25519-pub", lambda e: "home/id_ed25519.pub", ("deny:**/id_*",)),
    ("ctxnb-store", lambda e: ".ctxnb/store", ("deny:.ctxnb/",)),
    ("ctxnb-store-file", lambda e: ".ctxnb/store/x.parquet", ("deny:.ctxnb/",)),
    ("ctxnb-abs", lambda e: str(e.ws / ".ctxnb" / "store" / "x.parquet"), ("deny:.ctxnb/",)),
    ("temp-name", lambda e: TEMP_PREFIX + "0123", ("reserved-name",)),
    ("temp-name-nested", lambda e: f"sub/{TEMP_PREFIX}x", ("reserved-name",)),
    ("fullwidth-dotdot", lambda e: "\uff0e\uff0e/outside/secret.txt", ("unicode-lookalike",)),
    ("two-dot-leader", lambda e: "\u2025/outside/secret.txt", ("unicode-lookalike",)),
    ("fullwidth-solidus", lambda e: "sub\uff0f..\uff0fx", ("unicode-lookalike",)),
    ("fullwidth-tilde", lambda e: "\uff5e/x", ("unicode-lookalike",)),
    ("lone-surrogate", lambda e: "\ud800x", ("unencodable",)),
    ("file-trailing-slash", lambda e: "sub/f.txt/", ("trailing-slash",)),
]


def _run_op(policy: PathPolicy, op: str, path: str) -> object:
    if op == "check":
        return policy.check(path)
    if op == "check_write":
        return policy.check(path, for_write=True)
    if op == "read":
        return policy.read_bytes(path)
    if op == "write":
        return policy.write_bytes_atomic(path, b"PWNED", make_parents=True)
    if op == "append":
        return policy.write_bytes_atomic(path, b"PWNED", mode="append", make_parents=True)
    if op == "delete":
        return policy.delete(path)
    raise AssertionError(op)


@pytest.mark.parametrize("op", ["check", "check_write", "read", "write", "append", "delete"])
@pytest.mark.parametrize(("build", "rules"), [pytest.param(b, r, id=i) for i, b, r in HOSTILE])
def test_hostile_path_is_refused(env: Env, build: P, rules: tuple[str, ...], op: str) -> None:
    path = build(env)
    before = _snapshot(env.tmp)
    with pytest.raises(PolicyError) as info:
        _run_op(env.policy, op, path)
    err = info.value
    assert err.error_code == "PATH_DENIED"
    assert err.details["rule"] in rules, err.message
    assert err.recoverable is True and err.required_action
    assert err.details["rule"] in err.message
    assert _snapshot(env.tmp) == before  # nothing created, changed or removed anywhere
    assert not (env.outside / "new.txt").exists()


@pytest.mark.parametrize(("build", "rules"), [pytest.param(b, r, id=i) for i, b, r in HOSTILE])
def test_hostile_path_is_not_allowed(env: Env, build: P, rules: tuple[str, ...]) -> None:
    assert env.policy.is_allowed(build(env)) is False


def test_corpus_is_large_enough() -> None:
    assert len(HOSTILE) >= 40
    assert len({i for i, _, _ in HOSTILE}) == len(HOSTILE)


def test_refusal_is_machine_readable(env: Env) -> None:
    with pytest.raises(PolicyError) as info:
        env.policy.read_bytes("../outside/secret.txt")
    d = info.value.to_dict()
    assert d["error_code"] == "PATH_DENIED"
    assert "'../outside/secret.txt'" in d["message"] and "traversal" in d["message"]
    assert d["recoverable"] is True
    assert ".." in d["required_action"]
    assert d["details"] == {"path": "../outside/secret.txt", "rule": "traversal"}


def test_long_hostile_path_is_shortened_in_message(env: Env) -> None:
    with pytest.raises(PolicyError) as info:
        env.policy.check("x/" * 3000)
    assert len(info.value.message) < 400


def test_bytes_path_is_refused(env: Env) -> None:
    with pytest.raises(PolicyError) as info:
        env.policy.check(b"inside.txt")  # type: ignore[arg-type]
    assert info.value.details["rule"] == "not-a-string"


# ----------------------------------------------------------------- literal names


@pytest.mark.parametrize("name", ["%2e%2e%2fsecret.txt", "%2e%2e/secret.txt", "..%2f..%2fx", "..."])
def test_percent_encoded_and_dotty_names_stay_literal(env: Env, name: str) -> None:
    before_outside = _snapshot(env.outside)
    sp = env.policy.write_bytes_atomic(name, b"literal", make_parents=True)
    assert sp.rel == name
    assert sp.abs == env.ws.resolve() / name
    assert (env.ws / name).read_bytes() == b"literal"
    assert env.policy.read_bytes(name) == b"literal"
    assert _snapshot(env.outside) == before_outside


def test_nfkc_lookalike_of_plain_name_is_allowed(env: Env) -> None:
    # 'ﬁ' (U+FB01) folds to 'fi': a different name, but not a different shape.
    sp = env.policy.write_bytes_atomic("\ufb01le.txt", b"x")
    assert sp.rel == "\ufb01le.txt"


# ------------------------------------------------------------------ happy paths


def test_read_relative_absolute_and_normalized(env: Env) -> None:
    p = env.policy
    assert p.read_bytes("inside.txt") == b"inside"
    assert p.read_bytes(str(env.ws / "sub" / "f.txt")) == b"sub file"
    assert p.read_bytes("./sub//./f.txt") == b"sub file"
    assert p.read_bytes(env.ws / "inside.txt") == b"inside"  # os.PathLike
    sp = p.check("./sub//f.txt")
    assert sp == SafePath(
        rel="sub/f.txt", root=env.ws.resolve(), abs=env.ws.resolve() / "sub/f.txt"
    )
    assert sp.parts == ("sub", "f.txt")
    assert p.read_bytes(sp) == b"sub file"


def test_root_and_directories_pass_check_but_are_not_files(env: Env) -> None:
    p = env.policy
    assert p.check(".").rel == "."
    assert p.check(str(env.ws)).rel == "."
    assert p.check("sub/").rel == "sub"
    assert stat.S_ISDIR(p.stat(".").st_mode)
    assert stat.S_ISDIR(p.stat("sub").st_mode)
    for path in (".", "sub"):
        with pytest.raises(PolicyError) as info:
            p.read_bytes(path)
        assert info.value.details["rule"] == "not-a-regular-file"
        with pytest.raises(PolicyError):
            p.write_bytes_atomic(path, b"x")
    assert (env.ws / "sub" / "f.txt").read_bytes() == b"sub file"


def test_missing_file_passes_check_and_read_raises_not_found(env: Env) -> None:
    assert env.policy.check("nope/missing.txt").rel == "nope/missing.txt"
    with pytest.raises(NotFoundError, match="missing.txt"):
        env.policy.read_bytes("nope/missing.txt")
    with pytest.raises(NotFoundError):
        env.policy.read_bytes("missing.txt")
    with pytest.raises(NotFoundError):
        env.policy.read_bytes("inside.txt/child")  # a file used as a directory
    with pytest.raises(NotFoundError):
        env.policy.stat("missing.txt")
    with pytest.raises(NotFoundError):
        env.policy.delete("missing.txt")


def test_write_truncate_creates_and_replaces(env: Env) -> None:
    p = env.policy
    sp = p.write_bytes_atomic("new.txt", b"one")
    assert sp.rel == "new.txt" and (env.ws / "new.txt").read_bytes() == b"one"
    p.write_bytes_atomic("new.txt", b"two")
    assert (env.ws / "new.txt").read_bytes() == b"two"
    p.write_bytes_atomic("new.txt", b"")
    assert (env.ws / "new.txt").read_bytes() == b""


def test_write_create_refuses_existing(env: Env) -> None:
    p = env.policy
    p.write_bytes_atomic("fresh.txt", b"first", mode="create")
    assert (env.ws / "fresh.txt").read_bytes() == b"first"
    with pytest.raises(PolicyError) as info:
        p.write_bytes_atomic("fresh.txt", b"second", mode="create")
    assert info.value.error_code == "FILE_EXISTS"
    assert (env.ws / "fresh.txt").read_bytes() == b"first"
    assert not [n for n in os.listdir(env.ws) if n.startswith(TEMP_PREFIX)]


def test_write_append(env: Env) -> None:
    p = env.policy
    p.write_bytes_atomic("log.txt", b"a\n", mode="append")  # creates
    p.write_bytes_atomic("log.txt", b"b\n", mode="append")
    assert (env.ws / "log.txt").read_bytes() == b"a\nb\n"


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o640])
def test_write_keeps_permission_bits(env: Env, mode: int) -> None:
    target = env.ws / "tool.sh"
    target.write_bytes(b"#!/bin/sh\n")
    target.chmod(mode)
    env.policy.write_bytes_atomic("tool.sh", b"#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    env.policy.write_bytes_atomic("tool.sh", b"more\n", mode="append")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_bytes() == b"#!/bin/sh\necho hi\nmore\n"


def test_write_drops_setuid_bit(env: Env) -> None:
    target = env.ws / "prog"
    target.write_bytes(b"x")
    target.chmod(0o4755)
    env.policy.write_bytes_atomic("prog", b"y")
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


def test_new_file_gets_umask_mode(env: Env) -> None:
    old = os.umask(0o027)
    try:
        env.policy.write_bytes_atomic("m.txt", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((env.ws / "m.txt").stat().st_mode) == 0o640


def test_make_parents(env: Env) -> None:
    p = env.policy
    with pytest.raises(NotFoundError, match="make_parents=True"):
        p.write_bytes_atomic("a/b/c.txt", b"x")
    assert not (env.ws / "a").exists()
    p.write_bytes_atomic("a/b/c.txt", b"x", make_parents=True)
    assert (env.ws / "a" / "b" / "c.txt").read_bytes() == b"x"


def test_make_parents_through_file_fails(env: Env) -> None:
    with pytest.raises(NotFoundError):
        env.policy.write_bytes_atomic("inside.txt/x", b"x", make_parents=True)
    assert (env.ws / "inside.txt").read_bytes() == b"inside"


def test_write_replaces_hard_link_name_only(env: Env) -> None:
    outside_file = env.outside / "hard.txt"
    outside_file.write_bytes(SECRET)
    os.link(outside_file, env.ws / "hard.txt")
    assert env.policy.read_bytes("hard.txt") == SECRET  # documented: hard links are read
    env.policy.write_bytes_atomic("hard.txt", b"new")
    assert outside_file.read_bytes() == SECRET
    assert (env.ws / "hard.txt").read_bytes() == b"new"


def test_delete(env: Env) -> None:
    env.policy.delete("sub/f.txt")
    assert not (env.ws / "sub" / "f.txt").exists()
    with pytest.raises(PolicyError):
        env.policy.delete("sub")
    assert (env.ws / "sub").is_dir()


def test_stat_is_no_follow(env: Env) -> None:
    assert env.policy.stat("inside.txt").st_size == len(b"inside")
    with pytest.raises(PolicyError) as info:
        env.policy.stat("inlink")
    assert info.value.details["rule"] == "symlink"


def test_max_bytes(env: Env) -> None:
    assert env.policy.read_bytes("inside.txt", max_bytes=6) == b"inside"
    with pytest.raises(PolicyError) as info:
        env.policy.read_bytes("inside.txt", max_bytes=5)
    assert info.value.error_code == "FILE_TOO_LARGE"
    assert info.value.details["max_bytes"] == 5


def test_allow_globs(env: Env) -> None:
    (env.ws / "src").mkdir()
    (env.ws / "src" / "app.py").write_bytes(b"print()")
    policy = PathPolicy([env.ws], allow=["src/**/*.py", "*.md"])
    assert policy.read_bytes("src/app.py") == b"print()"
    assert policy.check("src").rel == "src"  # directories are not subject to allow globs
    with pytest.raises(PolicyError) as info:
        policy.read_bytes("inside.txt")
    assert info.value.details["rule"] == "not-allowed"
    with pytest.raises(PolicyError):
        policy.write_bytes_atomic("src/data.json", b"{}")
    assert not (env.ws / "src" / "data.json").exists()
    assert [sp.rel for sp in policy.iter_files()] == ["src/app.py"]


def test_deny_wins_over_allow(env: Env) -> None:
    policy = PathPolicy([env.ws], allow=["**"])
    with pytest.raises(PolicyError) as info:
        policy.read_bytes(".env")
    assert info.value.details["rule"] == "deny:.env*"


def test_deny_defaults_and_empty_deny(env: Env) -> None:
    assert PathPolicy([env.ws], deny=None).deny == DEFAULT_DENY
    open_policy = PathPolicy([env.ws], deny=[])
    assert open_policy.read_bytes(".env") == SECRET
    assert open_policy.read_bytes(".git/config") == SECRET
    # The built-in rules still hold with an empty deny list.
    for path in ("../outside/secret.txt", "link_out", "fifo", TEMP_PREFIX + "x"):
        assert not open_policy.is_allowed(path)


def test_custom_deny_with_negation(env: Env) -> None:
    (env.ws / ".env.example").write_bytes(b"KEY=")
    policy = PathPolicy([env.ws], deny=[".env*", "!.env.example"])
    assert policy.read_bytes(".env.example") == b"KEY="
    assert not policy.is_allowed(".env.local")


def test_denied_directory_content_cannot_be_reincluded(env: Env) -> None:
    (env.ws / "secrets").mkdir()
    (env.ws / "secrets" / "ok.txt").write_bytes(b"x")
    policy = PathPolicy([env.ws], deny=["secrets/", "!secrets/ok.txt"])
    assert not policy.is_allowed("secrets/ok.txt")


def test_a_glob_that_can_never_match_is_refused_by_the_list_it_came_from(tmp_path: Path) -> None:
    # deny and protect are compiled together (one guard spec); the error still names the
    # list that holds the bad glob.
    trailing = "a\\"  # a trailing backslash: git never matches it
    with pytest.raises(ConfigError, match=re.escape(f"Bad deny glob {trailing!r}")):
        PathPolicy([tmp_path], deny=["ok", trailing], protect=[".orchestration/"])
    with pytest.raises(ConfigError, match=re.escape("Bad protect glob 'x['")):
        PathPolicy([tmp_path], deny=["ok"], protect=["x["])
    with pytest.raises(ConfigError, match="each glob must be a string"):
        PathPolicy([tmp_path], protect=["ok", 3])  # type: ignore[list-item]
    policy = PathPolicy([tmp_path], deny=["*.key"], protect=["gov/"])
    assert policy.denied_by("a/b.key") == "deny:*.key"
    assert policy.denied_by("gov/x") == "governance:gov/"
    assert policy.denied_by("A/B.KEY") == "deny:*.key"


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least one"):
        PathPolicy([])
    with pytest.raises(ConfigError, match="not an existing directory"):
        PathPolicy([tmp_path / "missing"])
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(ConfigError):
        PathPolicy([tmp_path / "f"])
    with pytest.raises(ConfigError, match="glob"):
        PathPolicy([tmp_path], deny=["\\"])
    with pytest.raises(ConfigError, match="list"):
        PathPolicy([tmp_path], deny=".env")  # a bare string, not a list
    with pytest.raises(ConfigError):
        PathPolicy([tmp_path], max_path_bytes=0)


def test_root_given_through_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real_ws"
    real.mkdir()
    (real / "a.txt").write_bytes(b"a")
    alias = tmp_path / "alias"
    os.symlink(real, alias)
    policy = PathPolicy([alias])
    assert policy.roots == (real.resolve(),)
    assert policy.read_bytes(str(alias / "a.txt")) == b"a"  # spelled as configured
    assert policy.read_bytes(str(real / "a.txt")) == b"a"  # spelled as the real path
    assert policy.check("a.txt").root == real.resolve()


def test_multiple_and_nested_roots(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    nested = a / "vendor"
    for d in (a, b, nested):
        d.mkdir(parents=True, exist_ok=True)
    (b / "x.txt").write_bytes(b"bx")
    (nested / "y.txt").write_bytes(b"ny")
    policy = PathPolicy([a, b, nested])
    assert policy.check("x.txt").root == a.resolve()  # relative -> first root
    sp = policy.check(str(b / "x.txt"))
    assert (sp.root, sp.rel) == (b.resolve(), "x.txt")
    assert policy.read_bytes(sp) == b"bx"
    sp = policy.check(str(nested / "y.txt"))
    assert (sp.root, sp.rel) == (nested.resolve(), "y.txt")  # longest root wins


def test_forged_safepath_is_revalidated(env: Env, tmp_path: Path) -> None:
    forged = SafePath(rel="../outside/secret.txt", root=env.ws, abs=env.outside / "secret.txt")
    with pytest.raises(PolicyError) as info:
        env.policy.read_bytes(forged)
    assert info.value.details["rule"] == "traversal"
    foreign = SafePath(rel="secret.txt", root=env.outside, abs=env.outside / "secret.txt")
    with pytest.raises(PolicyError) as info:
        env.policy.read_bytes(foreign)
    assert info.value.details["rule"] == "outside-roots"
    absolute = SafePath(rel=str(env.outside / "secret.txt"), root=env.ws.resolve(), abs=env.ws)
    with pytest.raises(PolicyError):
        env.policy.read_bytes(absolute)


def test_device_node_is_refused(env: Env) -> None:
    try:
        os.mknod(env.ws / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        # CI runs as root, where mknod works: there a refusal fails the test.
        require(False, f"creating a device node (mknod said: {exc})")
    for op in ("check", "read", "write", "delete"):
        with pytest.raises(PolicyError) as info:
            _run_op(env.policy, op, "null")
        assert info.value.details["rule"] == "special-file"
    assert stat.S_ISCHR(os.lstat(env.ws / "null").st_mode)


@pytest.mark.timeout(30)
def test_fifo_never_blocks_a_read(env: Env) -> None:
    # Fails by hanging (caught by the timeout) if the FIFO were opened blocking.
    with pytest.raises(PolicyError):
        env.policy.read_bytes("fifo")
    with pytest.raises(PolicyError):
        env.policy.write_bytes_atomic("fifo", b"x")
    assert stat.S_ISFIFO(os.lstat(env.ws / "fifo").st_mode)


# --------------------------------------------------------------- races (TOCTOU)


def test_parent_swapped_for_symlink_after_check(env: Env) -> None:
    (env.outside / "f.txt").write_bytes(SECRET)
    sp = env.policy.check("sub/f.txt")
    os.rename(env.ws / "sub", env.ws / "sub_orig")
    os.symlink(env.outside, env.ws / "sub")
    with pytest.raises(PolicyError) as info:
        env.policy.read_bytes(sp)
    assert info.value.details["rule"] == "symlink"
    with pytest.raises(PolicyError):
        env.policy.write_bytes_atomic(sp, b"PWNED")
    with pytest.raises(PolicyError):
        env.policy.delete(sp)
    assert (env.outside / "f.txt").read_bytes() == SECRET


def test_file_swapped_for_symlink_after_check(env: Env) -> None:
    sp = env.policy.check("inside.txt")
    os.unlink(env.ws / "inside.txt")
    os.symlink(env.outside / "secret.txt", env.ws / "inside.txt")
    with pytest.raises(PolicyError):
        env.policy.read_bytes(sp)
    with pytest.raises(PolicyError):
        env.policy.write_bytes_atomic(sp, b"PWNED")
    assert (env.outside / "secret.txt").read_bytes() == SECRET


def _swapper(stop: threading.Event, swap: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            swap()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _swap_sub_with_link(env: Env, stop: threading.Event) -> threading.Thread:
    """Swap ``sub`` with a link to the outside directory and back until ``stop``."""
    real, link = env.ws / "sub_real", env.ws / "sub_link"
    os.symlink(env.outside, link)
    sub = env.ws / "sub"

    def swap() -> None:
        os.rename(sub, real)
        os.rename(link, sub)  # now sub -> outside
        os.rename(sub, link)
        os.rename(real, sub)

    return _swapper(stop, swap)


@pytest.mark.timeout(60)
def test_concurrent_dir_symlink_swaps_never_escape(env: Env) -> None:
    (env.outside / "f.txt").write_bytes(SECRET)
    stop = threading.Event()
    t = _swap_sub_with_link(env, stop)
    outcomes = {"read": 0, "refused": 0, "missing": 0}
    try:
        for i in range(400):
            try:
                data = env.policy.read_bytes("sub/f.txt")
                assert data == b"sub file"
                outcomes["read"] += 1
            except PolicyError as exc:
                assert exc.details["rule"] == "symlink"
                outcomes["refused"] += 1
            except NotFoundError:
                outcomes["missing"] += 1
            try:
                env.policy.write_bytes_atomic("sub/w.txt", b"%d" % i)
            except (PolicyError, NotFoundError):
                pass
    finally:
        stop.set()
        t.join()
    assert sum(outcomes.values()) == 400
    assert (env.outside / "f.txt").read_bytes() == SECRET
    assert not (env.outside / "w.txt").exists()


@pytest.mark.timeout(60)
def test_concurrent_fifo_swaps_never_block(env: Env) -> None:
    target, fifo, regular = env.ws / "t", env.ws / "t_fifo", env.ws / "t_reg"
    regular.write_bytes(b"regular")
    os.mkfifo(fifo)
    os.link(regular, target)
    spare_fifo = env.ws / "t_fifo2"
    os.mkfifo(spare_fifo)

    def swap() -> None:
        os.rename(spare_fifo, target)  # t is a FIFO now
        os.mkfifo(spare_fifo)
        os.link(regular, env.ws / "t_tmp")
        os.rename(env.ws / "t_tmp", target)  # t is regular again

    stop = threading.Event()
    t = _swapper(stop, swap)
    got = {"regular": 0, "refused": 0}
    try:
        for _ in range(400):
            try:
                assert env.policy.read_bytes("t") == b"regular"
                got["regular"] += 1
            except PolicyError as exc:
                assert exc.details["rule"] == "special-file"
                got["refused"] += 1
    finally:
        stop.set()
        t.join()
    assert sum(got.values()) == 400


# ------------------------------------------------------------ iter_files, temps


def test_iter_files_skips_denied_links_specials_and_temps(env: Env) -> None:
    (env.ws / "sub" / (TEMP_PREFIX + "leftover")).write_bytes(b"half")
    (env.ws / "sub" / "deep").mkdir()
    (env.ws / "sub" / "deep" / "g.py").write_bytes(b"")
    (env.ws / "bad\nname").write_bytes(b"")
    rels = [sp.rel for sp in env.policy.iter_files()]
    assert rels == ["inside.txt", "sub/deep/g.py", "sub/f.txt"]
    assert [sp.rel for sp in env.policy.iter_files(["*.py"])] == ["sub/deep/g.py"]
    assert [sp.rel for sp in env.policy.iter_files(["sub/*.txt"])] == ["sub/f.txt"]
    # gitignore semantics: "sub/*" matches the directory sub/deep and so all it holds.
    assert len(list(env.policy.iter_files(["sub/*"]))) == 2
    every = list(env.policy.iter_files())
    assert all(env.policy.is_allowed(sp) for sp in every)


def test_iter_files_can_be_abandoned(env: Env) -> None:
    it = env.policy.iter_files()
    assert next(it).rel == "inside.txt"
    it.close()  # closes the directory descriptors it held


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_no_descriptor_leaks(env: Env) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_fds()
    for _ in range(20):
        env.policy.read_bytes("sub/f.txt")
        env.policy.write_bytes_atomic("x/y.txt", b"y", make_parents=True)
        env.policy.write_bytes_atomic("x/y.txt", b"z", mode="append")
        env.policy.stat("sub/f.txt")
        env.policy.check("sub/f.txt")
        list(env.policy.iter_files())
        env.policy.delete("x/y.txt")
        for path in ("linkdir/secret.txt", "fifo", "link_out", "missing/f", "sub"):
            with pytest.raises((PolicyError, NotFoundError)):
                env.policy.read_bytes(path)
        with pytest.raises(PolicyError):
            env.policy.write_bytes_atomic("sub/f.txt", b"", mode="create")
    assert open_fds() == before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_directory_fsync_in_the_background_leaks_nothing(env: Env) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_fds()
    waits: list = []
    for k in range(20):
        env.policy.write_bytes_atomic("sub/f.txt", b"v%d" % k, durable_waits=waits)
    assert len(waits) == 20
    for wait in waits:
        assert wait() is None
    assert open_fds() == before  # each directory descriptor closed by its fsync
    assert env.policy.read_bytes("sub/f.txt") == b"v19"
    assert not [n for n in os.listdir(env.ws / "sub") if n.startswith(TEMP_PREFIX)]


def test_clean_temp_files(env: Env) -> None:
    leftover = env.ws / "sub" / (TEMP_PREFIX + "dead")
    leftover.write_bytes(b"half")
    assert env.policy.clean_temp_files() == 0  # young: maybe a live writer's
    assert leftover.exists()
    assert env.policy.clean_temp_files(older_than=0) == 1
    assert not leftover.exists()
    assert (env.ws / "sub" / "f.txt").exists()


_WRITER = """
import sys
from ctxnb.access.fdio import PathPolicy
ws, size, later = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "later"
policy = PathPolicy([ws])
k = 0
while True:
    waits = [] if later else None
    policy.write_bytes_atomic("big.bin", bytes([65 + k % 26]) * size, durable_waits=waits)
    for wait in waits or ():
        wait()
    if k == 0:
        print("ready", flush=True)
    k += 1
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_atomic_write_survives_sigkill(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    size = 4 * 1024 * 1024
    (ws / "big.bin").write_bytes(b"0" * size)
    policy = PathPolicy([ws])
    rng = random.Random(20250701)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for k in range(20):
        # Half the writers fsync the directory in the background (durable_waits).
        mode = "later" if k % 2 else "now"
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(ws), str(size), mode],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n"
            threading.Event().wait(rng.uniform(0.0, 0.08))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        data = policy.read_bytes("big.bin")
        assert len(data) == size
        assert data == data[:1] * size, "a mix of old and new content"
        assert [sp.rel for sp in policy.iter_files()] == ["big.bin"]
    policy.clean_temp_files(older_than=0)
    assert os.listdir(ws) == ["big.bin"]


_PATH_ALPHABET = st.sampled_from(
    ["/", ".", "..", "\\", "~", "\x00", "a", "b", "é", "\uff0e", "\uff0f", "%2e", "%2f", " ", "\n"]
)


@settings(max_examples=300, deadline=None, database=None)
@given(pieces=st.lists(_PATH_ALPHABET, max_size=12))
def test_property_accepted_paths_stay_inside_and_are_canonical(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str]
) -> None:
    ws = tmp_path_factory.getbasetemp() / "prop_ws"
    ws.mkdir(exist_ok=True)
    policy = PathPolicy([ws])
    path = "".join(pieces)
    try:
        sp = policy.check(path)
    except PolicyError as exc:
        assert exc.error_code == "PATH_DENIED"
        return
    root = ws.resolve()
    assert sp.root == root
    assert os.path.commonpath([root, sp.abs]) == str(root)
    assert ".." not in sp.parts and "" not in sp.parts and "." not in sp.parts
    assert policy.check(sp.rel) == sp  # canonical: checking the result changes nothing
    assert policy.check(str(sp.abs)) == sp


# Tildes and their look-alikes: fullwidth (NFKC '~'), small tilde and tilde operator
# (NFKC leaves them other characters), a combining tilde, a fullwidth full stop and
# solidus, and NFC/NFD pairs ('é' composed and decomposed).
_TILDE_ALPHABET = st.sampled_from(
    ["~", "\uff5e", "\u02dc", "\u223c", "\u0303", "/", ".", "./", "a", " ", "\uff0e",
     "\uff0f", "\u00e9", "e\u0301", "~/", "\uff5e/"]
)  # fmt: skip


@settings(max_examples=400, deadline=None, database=None)
@given(pieces=st.lists(_TILDE_ALPHABET, max_size=8), absolute=st.booleans())
def test_property_a_tilde_never_leads_an_accepted_path_and_its_rel_checks_the_same(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str], absolute: bool
) -> None:
    import unicodedata

    ws = tmp_path_factory.getbasetemp() / "prop_tilde_ws"
    ws.mkdir(exist_ok=True)
    policy = PathPolicy([ws])
    path = "".join(pieces)
    if absolute:
        path = f"{ws}/{path}"
    try:
        sp = policy.check(path)
    except PolicyError as exc:
        assert exc.error_code == "PATH_DENIED"
        return
    if sp.parts:
        lead = sp.parts[0]
        assert not lead.startswith("~")
        assert not unicodedata.normalize("NFKC", lead).startswith("~")
        # A file of that name found by a walk is judged as the path was.
        assert policy.refusal(sp.parts) is None
    assert policy.check(sp.rel) == sp
    assert policy.check(f"./{sp.rel}") == sp
    assert policy.check(str(sp.abs)) == sp


def test_docstring_examples() -> None:
    for mod in (pathpolicy_mod, rules_mod):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 3, mod.__name__
        assert result.failed == 0, mod.__name__


_NAME = st.sampled_from(
    [".git", ".GIT", ".git ", ".env", ".ENV.local", ".envrc", "id_rsa", "ID_ED25519.pub",
     "key.pem", "KEY.PEM.", "k.pem ", ".ctxnb", ".orchestration", "src", "a.py", "é",
     "\uff0eenv", ".ｅｎｖ", "x\\y", "x\x7f", "\u202e", "~", "~home", ".ctxnb-tmp-1", " "]
)  # fmt: skip


@settings(max_examples=300, deadline=None, database=None)
@given(parts=st.lists(_NAME, min_size=1, max_size=4))
def test_property_a_walk_judges_only_the_last_name_with_the_same_answer(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    # The walk enters a directory only when its path was accepted; below it, judging the
    # last name alone must give what judging the whole path gives.
    ws = tmp_path_factory.getbasetemp() / "prop_walk_ws"
    ws.mkdir(exist_ok=True)
    for policy in (PathPolicy([ws]), PathPolicy([ws], protect=rules_mod.GOVERNANCE)):
        path = tuple(parts)
        if any(policy.refusal(path[:i]) is not None for i in range(1, len(path))):
            continue
        policy._deny_cache.clear()
        walked = policy.refusal(path, parent_checked=True)
        policy._deny_cache.clear()
        assert walked == policy.refusal(path)


# --------------------------------------------------------------- stat_many


def _stat_answer(policy: PathPolicy, path: str) -> object:
    try:
        st_ = policy.stat(path)
    except PolicyError as e:
        return ("refused", e.details["rule"])
    except NotFoundError:
        return ("missing",)
    return ("ok", st_.st_ino, st_.st_mode)


def _many_answer(r: object) -> object:
    if isinstance(r, PolicyError):
        return ("refused", r.details["rule"])
    if isinstance(r, NotFoundError):
        return ("missing",)
    assert isinstance(r, os.stat_result)
    return ("ok", r.st_ino, r.st_mode)


def test_stat_many_answers_what_stat_answers_on_hostile_paths(env: Env) -> None:
    # The batch shares each directory's walk; every answer must still be stat()'s own.
    (env.ws / "sub" / "deep").mkdir()
    (env.ws / "sub" / "deep" / "g.txt").write_bytes(b"g")
    ws = str(env.ws)
    paths = [
        "inside.txt", f"{ws}/inside.txt", "sub/f.txt", "sub//f.txt", "./sub/f.txt",
        "sub/deep/g.txt", f"{ws}/sub/deep/g.txt", "sub/f.txt/", "sub", "sub/deep",
        "missing.txt", "sub/missing/x.txt", "inside.txt/x", "link_out", "linkdir/secret.txt",
        "linkdir/d/secret.txt", "insubdirlink/f.txt", "inlink", "fifo", "sock", "devnull",
        "gitalias/config", "dangling", "chain1", ".env", "sub/key.pem", ".git/config", ".", ws,
        *(build(env) for _, build, _ in HOSTILE),
    ]  # fmt: skip
    got = [_many_answer(r) for r in env.policy.stat_many(paths)]
    want = [_stat_answer(env.policy, p) for p in paths]
    assert got == want
    kinds = {g[0] for g in got}
    assert kinds == {"ok", "refused", "missing"}
    assert dict(zip(paths, got, strict=True))["linkdir/secret.txt"] == ("refused", "symlink")


def test_stat_many_refuses_a_parent_swapped_for_a_symlink_between_calls(env: Env) -> None:
    (env.outside / "f.txt").write_bytes(SECRET)
    paths = ["sub/f.txt", "inside.txt"]
    assert [_many_answer(r)[0] for r in env.policy.stat_many(paths)] == ["ok", "ok"]
    os.rename(env.ws / "sub", env.ws / "sub_orig")
    os.symlink(env.outside, env.ws / "sub")
    got = [_many_answer(r) for r in env.policy.stat_many(paths)]
    assert got[0] == ("refused", "symlink") and got[1][0] == "ok"


@pytest.mark.timeout(60)
def test_stat_many_under_concurrent_dir_symlink_swaps_never_sees_outside(env: Env) -> None:
    (env.outside / "f.txt").write_bytes(SECRET)
    outside_ino = (env.outside / "f.txt").stat().st_ino
    stop = threading.Event()
    t = _swap_sub_with_link(env, stop)
    seen: set[str] = set()
    try:
        for _ in range(300):
            for r in env.policy.stat_many(["sub/f.txt", "inside.txt"]):
                ans = _many_answer(r)
                seen.add(str(ans[0]))
                if ans[0] == "ok":
                    assert ans[1] != outside_ino
                elif ans[0] == "refused":
                    assert ans[1] == "symlink"
    finally:
        stop.set()
        t.join()
    assert "ok" in seen


# -- a listing judged at once ------------------------------------------------------------------
_LISTED_NAMES = st.sampled_from(
    ["src", "a.py", ".env", ".ENV.local", "key.pem", "id_rsa", ".git", "config", ".ctxnb",
     "store", "\uff45nv", ".env.", "schlu\u0308ssel", "schl\u00fcssel", "build", "__init__.py",
     "ctxnb.toml", ".claude", "settings.json", "~home", "x\u202ey"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    paths=st.lists(st.lists(_LISTED_NAMES, min_size=1, max_size=4).map("/".join), max_size=20),
    deny=st.sampled_from(
        [
            list(rules_mod.DEFAULT_DENY),
            [*rules_mod.DEFAULT_DENY, "/build/", "src/config"],  # anchored: no name cache
            ["schl\u00fcssel/", "**/store"],
        ]
    ),
)
def test_a_listing_is_refused_exactly_where_each_path_is(tmp_path_factory, paths, deny):
    """refused_among (each directory once, files by name when every glob allows) refuses
    exactly the paths denied_by refuses one by one."""
    root = tmp_path_factory.mktemp("listing")
    rules = rules_mod.PathRules([root], deny=deny, protect=rules_mod.GOVERNANCE)
    expected = [p for p in paths if rules.denied_by(p) is not None]
    assert [p for p, _ in rules.refused_among(paths)] == expected
