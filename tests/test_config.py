import pytest

from ctxnb.access import DEFAULT_DENY
from ctxnb.config import load_config
from ctxnb.errors import ConfigError


def test_defaults_without_file(tmp_path):
    cfg = load_config(tmp_path)
    assert cfg.profile == "cloud"
    assert tuple(cfg.policy.deny) == DEFAULT_DENY  # the one deny list of ctxnb.access
    assert cfg.active_profile().max_read_chars > cfg.active_profile("local").max_read_chars


def test_ctxnb_toml(tmp_path):
    (tmp_path / "ctxnb.toml").write_text(
        'profile = "local"\n[index]\nignore = ["*.log"]\n'
        '[[mounts]]\nagent_prefix = "/workspace"\ncanonical_prefix = "/home/me/p"\n'
        "[profiles.tiny]\nmax_read_chars = 100\nexcerpt_lines = 5\nsummary_tokens = 20\n"
    )
    cfg = load_config(tmp_path)
    assert cfg.profile == "local"
    assert cfg.index.ignore == ["*.log"]
    assert cfg.mounts[0].agent_prefix == "/workspace"
    assert set(cfg.profiles) == {"local", "cloud", "tiny"}


def test_pyproject_section(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ctxnb]\nprofile = "local"\n')
    assert load_config(tmp_path).profile == "local"


def test_unknown_key_names_file_key_and_allowed(tmp_path):
    (tmp_path / "ctxnb.toml").write_text("[index]\nignor = []\n")
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    msg = str(e.value)
    assert "ctxnb.toml" in msg and "index.ignor" in msg and "ignore" in msg


def test_bad_value(tmp_path):
    (tmp_path / "ctxnb.toml").write_text("[index]\nmax_file_bytes = -3\n")
    with pytest.raises(ConfigError, match="max_file_bytes"):
        load_config(tmp_path)


def test_bad_toml_and_unknown_profile(tmp_path, monkeypatch):
    (tmp_path / "ctxnb.toml").write_text("profile = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)
    (tmp_path / "ctxnb.toml").write_text('profile = "huge"\n')
    with pytest.raises(ConfigError, match="huge"):
        load_config(tmp_path)


def test_env_overrides_file_profile(tmp_path, monkeypatch):
    (tmp_path / "ctxnb.toml").write_text('profile = "cloud"\n')
    monkeypatch.setenv("CTXNB_PROFILE", "local")
    cfg = load_config(tmp_path)
    assert cfg.active_profile() == cfg.profiles["local"]
    assert cfg.active_profile("cloud") == cfg.profiles["cloud"]


def test_seed_sections_are_accepted(tmp_path):
    (tmp_path / "ctxnb.toml").write_text(
        """
[mcp.servers.files]
command = "python"
args = ["-m", "ctxnb", "mcp", "serve", "."]
read_only_tools = ["read_*"]

[mcp.servers.docs]
url = "http://127.0.0.1:8931/mcp"
bearer_token_env = "DOCS_TOKEN"

[skills]
root = "agent-skills"

[rules]
root = "src"

[adapters.mcp]
expose_registry = true
"""
    )
    cfg = load_config(tmp_path)
    assert set(cfg.mcp.servers) == {"files", "docs"}
    assert cfg.mcp.servers["files"].command == "python"
    assert cfg.mcp.servers["docs"].bearer_token_env == "DOCS_TOKEN"
    assert cfg.skills.root == "agent-skills" and cfg.rules.root == "src"
    assert cfg.adapters.mcp.expose_registry and cfg.adapters.claude_code.enabled


def test_seed_sections_have_precise_errors(tmp_path):
    cfg_file = tmp_path / "ctxnb.toml"
    cfg_file.write_text('[mcp.servers.docs]\nurl = "http://x/mcp"\ntoken = "inline"\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    msg = str(e.value)
    assert str(cfg_file) in msg and "'mcp.servers.docs.token'" in msg
    assert "bearer_token_env" in msg  # what is allowed there
    cfg_file.write_text('[mcp.servers.both]\ncommand = "x"\nurl = "http://x/mcp"\n')
    with pytest.raises(ConfigError, match="exactly one of 'command'"):
        load_config(tmp_path)
    cfg_file.write_text('[mcp.servers.a__b]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match="without '__'"):
        load_config(tmp_path)
    cfg_file.write_text("[adapters.cursor]\nenabled = true\n")
    with pytest.raises(ConfigError, match="allowed here: a2a, acp, claude_code, mcp"):
        load_config(tmp_path)


def _settings_classes():
    import dataclasses

    from ctxnb import config

    return [
        obj
        for name in config.__all__
        if dataclasses.is_dataclass(obj := getattr(config, name)) and isinstance(obj, type)
    ]


def _reference(cls):
    """The class as @dataclass(frozen=True, kw_only=True) generates it, methods and all."""
    import dataclasses

    return dataclasses.make_dataclass(
        cls.__name__,
        [(f.name, f.type, f) for f in dataclasses.fields(cls)],
        frozen=True,
        kw_only=True,
    )


_REQUIRED = {
    "MountConfig": {"agent_prefix": "/workspace", "canonical_prefix": "/home/me/proj"},
    "McpServerConfig": {"url": "http://127.0.0.1:8931/mcp"},
    "Profile": {"max_read_chars": 100, "excerpt_lines": 10, "summary_tokens": 50},
}


@pytest.mark.parametrize("cls", _settings_classes(), ids=lambda c: c.__name__)
def test_settings_compare_hash_and_show_as_generated_dataclasses_do(cls):
    # Equality, hash and repr are written once for every settings class instead of
    # generated per class: they must be what the generated ones give.
    import dataclasses

    ref = _reference(cls)
    kwargs = _REQUIRED.get(cls.__name__, {})
    a, b, r = cls(**kwargs), cls(**kwargs), ref(**kwargs)
    assert repr(a) == repr(r)
    assert a == b and not (a != b) and a != r and a != object()
    try:
        expected = hash(r)
    except TypeError:
        with pytest.raises(TypeError):
            hash(a)
    else:
        assert hash(a) == expected == hash(b)
    # One field changed: unequal (and shown), in both.
    f = dataclasses.fields(cls)[0]
    other = {**kwargs, f.name: None if getattr(a, f.name) is not None else "x"}
    c = cls.__new__(cls)
    for g in dataclasses.fields(cls):
        object.__setattr__(c, g.name, other.get(g.name, getattr(a, g.name)))
    assert (c == a) is False and repr(c) != repr(a)
