"""The walk's judgments kept between processes (``ctxnb.access._judgments``).

Each test walks with a new :class:`PathPolicy` (a fresh process has no judgments in
memory) and attacks what the kept file could get wrong: admitting a denied name. A
forged file, a damaged one, a link in its place, a copied key, rules edited between
runs, a directory made again, a name added behind a directory's restored mtime.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _data import age_files
from _needs import require
from _paths import REPO

from ctxnb.access import _judgments
from ctxnb.access._judgments import CACHE_FILE, KEY_FILE, Judgments
from ctxnb.access.fdio import PathPolicy


def _tree(root: Path) -> Path:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / "src" / "deep" / "b.py").write_text("b = 1\n")
    (root / "README.md").write_text("# hi\n")
    (root / "id_rsa").write_text("not a real key\n")
    (root / "src" / "server.pem").write_text("not a real pem\n")
    (root / ".ctxnb").mkdir()  # as a workspace has it (the store): not made by the walk
    return root


def _walk(root: Path, *, racy_ns: int = 0, deny: list[str] | None = None):
    """One walk as a fresh process makes it: (accepted, refused, the judgments used)."""
    policy = PathPolicy([root]) if deny is None else PathPolicy([root], deny=deny)
    memo = Judgments.open(root / ".ctxnb", policy, racy_ns=racy_ns)
    refused: dict[str, str] = {}
    walk = policy.walk(judgments=memo, on_refused=lambda r, rule: refused.__setitem__(r, rule))
    accepted = [e.rel for e in walk]
    memo.save()
    return accepted, refused, memo


def _plain(root: Path, deny: list[str] | None = None):
    policy = PathPolicy([root]) if deny is None else PathPolicy([root], deny=deny)
    refused: dict[str, str] = {}
    accepted = [e.rel for e in policy.walk(on_refused=lambda r, rule: refused.__setitem__(r, rule))]
    return accepted, refused


def _settle() -> None:
    # The kernel stamps times from a coarse clock: a change in the next tick must show.
    time.sleep(0.05)


def _forge(root: Path, edit, *, secret: bytes | None = None) -> None:
    """Rewrite the kept file with ``edit(data)`` applied, MAC'd under ``secret`` (the
    workspace's own when None: what only a process that can read .ctxnb/ could do)."""
    state = root / ".ctxnb"
    raw = (state / CACHE_FILE).read_bytes()
    data = json.loads(raw.partition(b"\n")[2])
    edit(data)
    body = json.dumps(data, separators=(",", ":")).encode()
    key_path = state / KEY_FILE
    real = key_path.read_bytes()
    st = key_path.stat()
    ident = f"{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}\n".encode()
    mac = hmac.new(secret or real, ident + body, hashlib.sha256).hexdigest().encode()
    (state / CACHE_FILE).write_bytes(mac + b"\n" + body)


def _admit_denied(data: dict) -> None:
    data["dirs"][""][5]["id_rsa"] = None
    data["dirs"]["src"][5]["server.pem"] = None


def test_a_second_walk_reuses_every_listing_and_answers_the_same(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    first = _walk(root)
    _settle()
    accepted, refused, memo = _walk(root)
    assert (accepted, refused) == first[:2] == _plain(root)
    assert refused == {
        ".ctxnb": "deny:.ctxnb/",
        "id_rsa": "deny:**/id_*",
        "src/server.pem": "deny:**/*.pem",
    }
    assert memo.reused == 3  # the root, src, src/deep: none listed again
    # Unchanged: the file is not written again.
    st = (root / ".ctxnb" / CACHE_FILE).stat()
    _walk(root)
    assert (root / ".ctxnb" / CACHE_FILE).stat().st_ino == st.st_ino
    key = (root / ".ctxnb" / KEY_FILE).stat()
    assert key.st_mode & 0o777 == 0o600 and key.st_size == 32
    assert (root / ".ctxnb" / CACHE_FILE).stat().st_mode & 0o777 == 0o600
    assert not [p for p in (root / ".ctxnb").iterdir() if p.name.endswith(".tmp")]


def test_a_fresh_directory_is_listed_again_until_it_is_out_of_the_racy_window(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path / "ws")
    _walk(root, racy_ns=_judgments.RACY_NS)
    # Made a moment ago: a name added in the same tick as the listing would not show.
    assert _walk(root, racy_ns=_judgments.RACY_NS)[2].reused == 0


def test_a_forged_file_without_the_secret_admits_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    _walk(root)
    # The rules key is public (a hash of the globs): guessed right, but no secret.
    _forge(root, _admit_denied, secret=b"\x00" * 32)
    _settle()
    accepted, refused, memo = _walk(root)
    assert memo.reused == 0
    assert "id_rsa" not in accepted and refused["id_rsa"] == "deny:**/id_*"
    assert refused["src/server.pem"] == "deny:**/*.pem"


def test_the_forgery_check_is_what_stops_it(tmp_path: Path) -> None:
    # The same edit under the workspace's own secret is believed: the MAC, not luck in
    # the format, is what refused the forgery above (and why .ctxnb/ stays unreadable
    # to every agent door).
    root = _tree(tmp_path / "ws")
    _walk(root)
    _forge(root, _admit_denied)
    _settle()
    accepted, _, memo = _walk(root)
    assert memo.reused == 3 and "id_rsa" in accepted


def test_a_key_and_cache_copied_from_elsewhere_do_not_verify(tmp_path: Path) -> None:
    # A tarball or copy carrying .ctxnb/ brings a key whose identity (inode, ctime) is
    # new where it lands: the MAC made for the original no longer verifies.
    src = _tree(tmp_path / "a")
    _walk(src)
    _forge(src, _admit_denied)
    dst = tmp_path / "b"
    shutil.copytree(src, dst)
    os.chmod(dst / ".ctxnb" / KEY_FILE, 0o600)
    accepted, refused, memo = _walk(dst)
    assert memo.reused == 0 and "id_rsa" in refused and "id_rsa" not in accepted


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "bad-json",
        "symlink",
        "group-writable",
        "key-readable",
        "key-symlink",
        "other-key",
    ],
)
def test_a_damaged_or_doubtful_file_means_judging_again(tmp_path: Path, damage: str) -> None:
    root = _tree(tmp_path / "ws")
    _walk(root)
    _forge(root, _admit_denied)  # believed as it is (see above): damage must undo that
    state = root / ".ctxnb"
    cache, key = state / CACHE_FILE, state / KEY_FILE
    if damage == "truncated":
        cache.write_bytes(cache.read_bytes()[:-40])
    elif damage == "bad-json":
        _forge(root, lambda d: d.update(dirs=[1, 2]))
    elif damage == "symlink":
        elsewhere = tmp_path / "elsewhere"
        cache.rename(elsewhere)
        cache.symlink_to(elsewhere)
    elif damage == "group-writable":
        os.chmod(cache, 0o620)
    elif damage == "key-readable":
        os.chmod(key, 0o644)
    elif damage == "key-symlink":
        moved = tmp_path / "key"
        key.rename(moved)
        key.symlink_to(moved)
    else:
        key.write_bytes(os.urandom(32))
        os.chmod(key, 0o600)
    _settle()
    accepted, refused, memo = _walk(root)
    assert memo.reused == 0
    assert "id_rsa" not in accepted and "src/server.pem" not in accepted
    assert set(refused) == {".ctxnb", "id_rsa", "src/server.pem"}
    # Written afresh: the next walk reuses it again, with the right answers.
    _settle()
    assert not cache.is_symlink() and not key.is_symlink()
    again = _walk(root)
    assert again[2].reused == 3 and again[:2] == (accepted, refused)


def test_rules_changed_between_walks_judge_every_name_again(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    _walk(root)
    _settle()
    # A deny glob added: names judged allowed under the old rules are not reused.
    accepted, refused, memo = _walk(root, deny=[*_plain_deny(), "*.py"])
    assert memo.reused == 0
    assert refused["src/a.py"] == "deny:*.py" and refused["src/deep/b.py"] == "deny:*.py"
    assert accepted == ["README.md"]


def _plain_deny() -> list[str]:
    return list(PathPolicy([Path("/")]).deny)


def test_a_directory_made_again_is_listed_again(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    _walk(root)
    shutil.rmtree(root / "src" / "deep")
    (root / "src" / "deep").mkdir()  # often at the same inode number
    (root / "src" / "deep" / ".env.local").write_text("KEY=generated\n")
    (root / "src" / "deep" / "c.py").write_text("c = 1\n")
    _settle()
    accepted, refused, _ = _walk(root)
    assert (accepted, refused) == _plain(root)
    assert refused["src/deep/.env.local"] == "deny:.env*"
    assert "src/deep/c.py" in accepted and "src/deep/b.py" not in accepted


def test_a_name_added_behind_a_restored_mtime_is_still_found(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    _walk(root)
    deep = root / "src" / "deep"
    before = deep.stat()
    _settle()
    (deep / "id_ed25519").write_text("not a real key\n")
    (deep / "new.py").write_text("n = 1\n")
    os.utime(deep, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert deep.stat().st_mtime_ns == before.st_mtime_ns  # the crafted part
    accepted, refused, memo = _walk(root)
    assert refused["src/deep/id_ed25519"] == "deny:**/id_*"  # the ctime moved: listed again
    assert "src/deep/new.py" in accepted
    assert memo.reused == 2  # the root and src only


def test_a_renamed_directory_is_judged_at_its_new_path(tmp_path: Path) -> None:
    # Judgments are by path: under a name the rules deny, the same directory is refused.
    root = _tree(tmp_path / "ws")
    _walk(root)
    (root / "src" / "deep").rename(root / "src" / ".git")
    _settle()
    accepted, refused, _ = _walk(root)
    assert refused["src/.git"] == "deny:.git" and not any(".git" in a for a in accepted)


def test_the_index_process_refuses_a_forged_admission(tmp_path: Path) -> None:
    # The real command: a fresh `ctxnb index` over a workspace whose kept judgments were
    # forged without the secret still refuses the denied files and indexes no byte of them.
    root = _tree(tmp_path / "ws")
    age_files(root)

    def index() -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "ctxnb", "index", "--json", str(root)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120,
            check=True,
        )
        return json.loads(proc.stdout)

    first = index()
    assert first["denied"] == 2 and (root / ".ctxnb" / CACHE_FILE).exists()
    _forge(root, _admit_denied, secret=os.urandom(32))
    _settle()
    again = index()
    assert again["denied"] == 2 and again["created"] == again["updated"] == 0


def test_a_walk_answered_by_kept_judgments_compiles_no_deny_glob(tmp_path: Path) -> None:
    # The deny globs are compiled on their first match: a fresh process whose names were
    # all judged before pays nothing for them; one new name compiles them and is judged.
    root = _tree(tmp_path / "ws")
    _walk(root)
    _settle()
    policy = PathPolicy([root])
    memo = Judgments.open(root / ".ctxnb", policy, racy_ns=0)
    assert len(list(policy.walk(judgments=memo))) == 3
    specs = (policy._deny_spec._set, policy._deny_spec_lower._set)
    assert [s._compiled for s in specs] == [None, None]
    (root / "src" / "deep" / "id_ecdsa").write_text("not a real key\n")
    _settle()
    refused: list[str] = []
    policy = PathPolicy([root])
    memo = Judgments.open(root / ".ctxnb", policy, racy_ns=0)
    list(policy.walk(judgments=memo, on_refused=lambda rel, rule: refused.append(rel)))
    assert "src/deep/id_ecdsa" in refused
    assert policy._deny_spec._set._compiled is not None


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 70_000, (1 << 20) + 1])
def test_the_mac_is_rfc_2104_hmac_sha256(size: int) -> None:
    # Computed without the hmac module (it loads OpenSSL): the digest must be the same.
    key, msg = os.urandom(32), os.urandom(size)
    assert _judgments.hmac_sha256(key, msg) == hmac.new(key, msg, hashlib.sha256).hexdigest()


def test_the_key_follows_the_judging_code_not_its_files_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An edited checkout judges again; a second install of the same code (other mtimes)
    # reuses what the first kept.
    from ctxnb.access import pathrules

    policy = PathPolicy([tmp_path])
    key = _judgments.rules_key(policy)
    copy = tmp_path / "pathrules.py"
    shutil.copyfile(pathrules.__file__, copy)
    os.utime(copy, (1, 1))
    monkeypatch.setattr(pathrules, "__file__", str(copy))
    assert _judgments.rules_key(policy) == key
    copy.write_bytes(copy.read_bytes() + b"\n# edited\n")
    assert _judgments.rules_key(policy) != key


@pytest.mark.parametrize("which", [CACHE_FILE, KEY_FILE])
def test_a_file_of_another_user_is_not_believed(tmp_path: Path, which: str) -> None:
    # Only root can give a file to another user; CI runs as root, so there it must run.
    require(os.geteuid() == 0, "root (to give a file to another user)")
    root = _tree(tmp_path / "ws")
    _walk(root)
    _forge(root, _admit_denied)  # believed while the files are ours (see above)
    os.chown(root / ".ctxnb" / which, 65534, 65534)
    _settle()
    accepted, refused, memo = _walk(root)
    assert memo.reused == 0 and "id_rsa" in refused and "id_rsa" not in accepted
