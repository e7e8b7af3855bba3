import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ctxnb.errors import ResolverError
from ctxnb.resolver import (
    FilesystemResolver,
    MountMapping,
    default_filesystem_id,
    doc_path,
    normalize_path,
)


@pytest.fixture
def resolver():
    return FilesystemResolver(
        "host",
        [
            MountMapping("/workspace", "/home/me/proj", "host"),
            MountMapping("/workspace/vendor", "/opt/vendor", "nfs"),
            MountMapping("/data", "/mnt/data", "nfs"),
        ],
    )


def test_translation(resolver):
    src = resolver.resolve("/workspace/src/main.py")
    assert (src.filesystem_id, src.path) == ("host", "/home/me/proj/src/main.py")


def test_longest_prefix_wins(resolver):
    src = resolver.resolve("/workspace/vendor/lib.py")
    assert (src.filesystem_id, src.path) == ("nfs", "/opt/vendor/lib.py")


def test_whole_component_match(resolver):
    src = resolver.resolve("/workspace2/x.py")
    assert (src.filesystem_id, src.path) == ("host", "/workspace2/x.py")
    assert resolver.resolve("/workspacex").path == "/workspacex"


def test_prefix_itself(resolver):
    assert resolver.resolve("/workspace").path == "/home/me/proj"
    assert resolver.resolve("/workspace/").path == "/home/me/proj"


def test_default_fallback(resolver):
    src = resolver.resolve("/tmp/scratch.txt")
    assert (src.filesystem_id, src.path) == ("host", "/tmp/scratch.txt")


def test_normalizes_dots_before_matching(resolver):
    assert resolver.resolve("/workspace/a/../b.py").path == "/home/me/proj/b.py"
    # `..` out of the mount leaves the mount
    assert resolver.resolve("/workspace/../etc/passwd").path == "/etc/passwd"


def test_reverse_translation(resolver):
    assert resolver.reverse_resolve("/home/me/proj/src/main.py", "host") == "/workspace/src/main.py"
    assert resolver.reverse_resolve("/opt/vendor/lib.py", "nfs") == "/workspace/vendor/lib.py"
    # same path on another filesystem is not that mount
    assert resolver.reverse_resolve("/opt/vendor/lib.py", "host") == "/opt/vendor/lib.py"
    # falls back to the canonical path
    assert resolver.reverse_resolve("/elsewhere/x", "host") == "/elsewhere/x"


def test_watchability(resolver):
    assert resolver.is_watchable("/workspace/src/main.py")
    assert resolver.is_watchable("/data/file.csv")
    assert not resolver.is_watchable("/tmp/inside-container.txt")
    assert not resolver.is_watchable("/workspace2/x")
    assert FilesystemResolver("host").is_watchable("/anything")


def test_relative_and_nul_paths_are_errors(resolver):
    with pytest.raises(ResolverError, match="absolute"):
        resolver.resolve("src/main.py")
    with pytest.raises(ResolverError, match="NUL"):
        resolver.resolve("/workspace/a\x00b")
    with pytest.raises(ResolverError):
        MountMapping("relative", "/x", "fs")


def test_same_file_two_mounts_one_identity():
    from ctxnb.hashing import identity_hash

    r = FilesystemResolver(
        "host",
        [MountMapping("/a", "/real/proj", "host"), MountMapping("/b", "/real/proj", "host")],
    )
    s1, s2 = r.resolve("/a/x.py"), r.resolve("/b/x.py")
    assert identity_hash("file", s1.to_dict()) == identity_hash("file", s2.to_dict())


def test_default_filesystem_id_is_stable_hex(monkeypatch):
    fid = default_filesystem_id()
    assert len(fid) == 64 and int(fid, 16) >= 0
    assert default_filesystem_id() == fid


def test_doc_path():
    assert doc_path("./Src\\Main.PY") == "src/main.py"
    assert doc_path("a//b/./c/../d.txt") == "a/b/d.txt"
    assert doc_path("Caf\u0065\u0301.md") == doc_path("Caf\u00e9.md")
    with pytest.raises(ResolverError):
        doc_path("a\x00b")


segment = st.text(
    alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=8,
).filter(lambda s: s not in (".", ".."))


@given(st.lists(segment, min_size=0, max_size=5), st.sampled_from(["/workspace", "/data", "/x"]))
def test_reverse_of_resolve_is_identity(parts, prefix):
    r = FilesystemResolver(
        "host",
        [
            MountMapping("/workspace", "/home/me/proj", "host"),
            MountMapping("/data", "/mnt/d", "nfs"),
        ],
    )
    p = "/".join([prefix, *parts])
    # A host path that is itself under a mount's canonical prefix is ambiguous by design.
    assume(not p.startswith("/home/me/proj"))
    src = r.resolve(p)
    assert r.reverse_resolve(src.path, src.filesystem_id) == p


@given(st.lists(st.sampled_from(["", ".", "..", "a", ".a", "b.", "...", "a b"]), max_size=6))
def test_normalize_path_equals_normpath_on_every_shape(names):
    # normalize_path returns an already-normal path as it is: it must agree with
    # posixpath.normpath (a leading '//' folded) on every shape, normal or not.
    import posixpath

    for path in ("/" + "/".join(names), "/" + "/".join(names) + "/", "//" + "/".join(names)):
        want = posixpath.normpath(path)
        want = "/" + want.lstrip("/") if want.startswith("//") else want
        assert normalize_path(path) == want
