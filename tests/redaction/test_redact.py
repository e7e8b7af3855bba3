"""Tests for ctxnb.redaction.redactor: a corpus of secrets and of look-alikes."""

from __future__ import annotations

import doctest
import random
import re
import string

import pytest
from _paths import REPO
from _secret_corpus import LOOKALIKES, SECRETS, Case
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxnb.redaction import redactor as redact_module
from ctxnb.redaction._formats import STRUCTURAL_RULES
from ctxnb.redaction.redactor import RULES, has_secrets, redact, redact_data, shannon_entropy


def fake(n: int, seed: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """Invented random-looking characters (seeded, so the corpus is fixed)."""
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


# Random-looking but invented values; none is a live credential.
GH = "ghp_" + fake(36, 1)
GHO = "gho_" + fake(36, 2)
GHS = "ghs_" + fake(36, 3)
GH_FINE = "github_pat_" + fake(22, 4) + "_" + fake(59, 5)
GOOGLE = "AIza" + fake(35, 6, string.ascii_letters + string.digits + "_-")
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi6Z7rMQk3Jf2EXAMPLEkeyDATA\n"
    "x8Qv2Lr9Zk1Wm4Np7Bc3Yd6Hf0Gs5Jt8Ku2Ev9Rw1Xa4Sb7Tc0Ud3Ve6Wf9Xg2Yh\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
# Hugging Face's organization token is letters only; Sentry's organization token is
# base64 of a JSON claim ({"iat":…,"region_url":…}) then "_" and a 43-character key.
HF_ORG = "api_org_" + fake(34, 7, string.ascii_letters)
SENTRY_ORG = (
    "sntrys_eyJpYXQiO"
    + fake(24, 8, string.ascii_letters + string.digits + "+/")
    + "InJlZ2lvbl91cmwi"
    + fake(30, 9, string.ascii_letters + string.digits + "+/")
    + "_"
    + fake(43, 10, string.ascii_letters + string.digits + "+/")
)
SENTRY_USER = "sntryu_" + fake(64, 11, "0123456789abcdef")

# (rule, text, secret): the secret must be gone and everything else kept.
TRUE_POSITIVES = [
    ("huggingface-token", f'HfApi(token="{HF_ORG}")', HF_ORG),
    ("huggingface-token", f"hub login {HF_ORG}", HF_ORG),
    ("sentry-token", f'sentryToken := "{SENTRY_ORG}"', SENTRY_ORG),
    ("sentry-token", f"SENTRY_AUTH_TOKEN={SENTRY_ORG}\n", SENTRY_ORG),
    ("sentry-token", f"sentry-cli --auth-token {SENTRY_USER} releases list", SENTRY_USER),
    ("cli-credential", "mysql -u app -pQz7Lk2Wm9 shop", "Qz7Lk2Wm9"),
    ("k8s-secret", "kind: Secret\ndata:\n  tls.key: UXo3TGsyV205\n", "UXo3TGsyV205"),
    ("secret-value", "DB_PASSWORD='Maple orbit12'", "Maple orbit12"),
    ("secret-value", "token = 'aGVsbG8='", "aGVsbG8="),
    ("aws-access-key-id", "AWS_ACCESS_KEY_ID=AKIAZ7Q2MXK4TR6W3PLN", "AKIAZ7Q2MXK4TR6W3PLN"),
    ("aws-access-key-id", "key: ASIAQ3XJ5TN2R7WK4LMP", "ASIAQ3XJ5TN2R7WK4LMP"),
    ("aws-access-key-id", "id = AKIAQ7RW2MX4TN6K3PLV", "AKIAQ7RW2MX4TN6K3PLV"),
    (
        "aws-secret-access-key",
        'aws_secret_access_key = "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"',
        "wJa7rXUtnFEMI/K7MDENG/bPxRfiCYq3Zk9LmW2p",
    ),
    ("github-token", f"export GITHUB_TOKEN={GH}", GH),
    ("github-token", f"headers = {{'Authorization': 'token {GHO}'}}", GHO),
    ("github-token", GHS, GHS),
    ("github-token", f"url: https://x:{GH_FINE}@github.com/o/r", GH_FINE),
    (
        "slack-token",
        "SLACK_BOT_TOKEN=xoxb-2944836105-4902748219377-Zq8LkW3pRt5VnX7yBc2Md9Hf",
        "xoxb-2944836105-4902748219377-Zq8LkW3pRt5VnX7yBc2Md9Hf",
    ),
    (
        "slack-webhook",
        "hook = 'https://hooks.slack.com/services/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J'",
        "T0A1B2C3D/B4E5F6G7H/Qw8Er9Ty0Ui1Op2As3Df4Gh5J",
    ),
    (
        "stripe-key",
        "stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    ),
    ("stripe-key", "RK=rk_test_51HxQ2mK8zLp4Vn7Rt2Yb", "rk_test_51HxQ2mK8zLp4Vn7Rt2Yb"),
    ("google-api-key", f'"key": "{GOOGLE}"', GOOGLE),
    ("jwt", f"Authorization: Bearer {JWT}", JWT),
    ("url-credentials", "DATABASE_URL=postgres://app:Pq7xZ2rLk9@db:5432/app", "Pq7xZ2rLk9"),
    ("generic-secret", 'password = "Tr0ub4dor&3-horse!"', "Tr0ub4dor&3-horse!"),
    ("generic-secret", "api_key: 9f8e7D6c5B4a3f2e1d0c9b8a", "9f8e7D6c5B4a3f2e1d0c9b8a"),
    (
        "generic-secret",
        "SECRET_KEY=django-insecure-8f$k2!qz9@x#w1",
        "django-insecure-8f$k2!qz9@x#w1",
    ),
    ("generic-secret", '{"client_secret": "Qm9XkLp2Zr8Wv4Tn6Yb1"}', "Qm9XkLp2Zr8Wv4Tn6Yb1"),
    ("generic-secret", 'DB_PASSWORD: str = "hV7#mQ2$pL9!wX4z"', "hV7#mQ2$pL9!wX4z"),
    ("generic-secret", "auth_token := 'Zq1Xw2Ce3Vr4Bt5Ny6Mu7'", "Zq1Xw2Ce3Vr4Bt5Ny6Mu7"),
]


@pytest.mark.parametrize(("rule", "text", "secret"), TRUE_POSITIVES)
def test_true_positive(rule: str, text: str, secret: str) -> None:
    result = redact(text)
    assert secret not in result.text
    assert result.text == text.replace(secret, f"[REDACTED:{rule}]")
    assert [f.rule for f in result.findings] == [rule]
    (finding,) = result.findings
    assert text[finding.start : finding.end] == secret
    assert has_secrets(text)


KEY_KINDS = [c for c in SECRETS if c.kind.startswith("pem-")]


def test_every_rule_has_a_true_positive() -> None:
    found = {f.rule for case in SECRETS for f in redact(case.text).findings}
    found |= {f.rule for case in KEY_KINDS for f in redact(case.text.split("\n", 1)[1]).findings}
    names = {rule.name for rule in RULES} | set(STRUCTURAL_RULES)
    assert names == found | {rule for rule, _, _ in TRUE_POSITIVES}


def test_corpus_is_large_and_varied() -> None:
    assert len(SECRETS) >= 60 and len({c.kind for c in SECRETS}) >= 25
    assert len(LOOKALIKES) >= 30


def test_corpus_recall_and_false_redactions() -> None:
    """Recall >= 95% on the corpus and at most 3 look-alikes touched (the targets)."""
    leaked = [c.kind for c in SECRETS if any(s in redact(c.text).text for s in c.secrets)]
    touched = [c.kind for c in LOOKALIKES if redact(c.text).text != c.text]
    recall = 1 - len(leaked) / len(SECRETS)
    assert recall >= 0.95, leaked
    assert len(touched) <= 3, touched


@pytest.mark.parametrize("case", SECRETS, ids=lambda c: f"{c.kind}:{c.name}")
def test_corpus_secret_is_gone_and_the_rest_kept(case: Case) -> None:
    out = redact(case.text).text
    assert not [s for s in case.secrets if s in out]
    if any("\\n" in s for s in case.secrets) or case.kind == "fmt-yaml-block":
        # A JSON-escaped key: the escapes around the body go with it; a key body in a
        # block scalar: one marker covers its lines and the indentation between them.
        return
    # Only the secrets changed (each became one marker, its line breaks kept after it).
    expected = case.text
    for s in case.secrets:
        expected = expected.replace(s, "\x00" + "\n" * s.count("\n"))
    assert re.sub(r"\[REDACTED:[\w-]+\]", "\x00", out) == expected


@pytest.mark.parametrize("case", LOOKALIKES, ids=lambda c: f"{c.kind}:{c.name}")
def test_corpus_lookalike_is_kept(case: Case) -> None:
    assert redact(case.text).text == case.text


@pytest.mark.parametrize("case", KEY_KINDS, ids=lambda c: c.kind)
def test_key_body_cut_from_its_header_is_redacted(case: Case) -> None:
    """A slice of a key file that starts below the BEGIN line (as read_lines or a
    command's output may show it) still loses every body line."""
    lines = case.text.splitlines(keepends=True)
    for first in range(1, 4):
        piece = "".join(lines[first:])
        out = redact(piece).text
        body_lines = case.secrets[0].split("\n")
        assert not [ln for ln in body_lines if len(ln) >= 20 and ln in out], (first, out)


FALSE_POSITIVES = [
    # AWS's published documentation keys are on the stop-list (#29).
    "id = AKIAIOSFODNN7EXAMPLE",
    'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "Fixed in commit 4196919fb12cc4aa8ec0159a746c1e03b4ffa89c, see the changelog.",
    "sha = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'",
    "request_id = '123e4567-e89b-12d3-a456-426614174000'",
    "Each session has an id like 9b2f0c1e-7d4a-4e8b-a1c3-5f6e7d8c9b0a.",
    'password = ""',
    "password = ''",
    'password = os.environ["DB_PASSWORD"]',
    "token = get_token(user)",
    "api_key = settings.STRIPE_API_KEY",
    "secret = self.secret",
    "color: #ff00ff; background: #a1b2c3;",
    "encoded = 'aGVsbG8gd29ybGQ='  # base64 of 'hello world'",
    "GITHUB_TOKEN=<your-token-here>",
    "api_key: ${API_KEY}",
    "password: {{ vault_password }}",
    'SECRET_KEY = "changeme-in-production"',
    "token: xxxxxxxxxxxxxxxxxxxxxxxx",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    # A name after a vendor prefix: words to the tokenizer, though entropy calls it random.
    "route = 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",
    "handler = 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",
    "The prefixes api_org_ and sntrys_ and sntryu_ mark the tokens.",
    "sntryu_" + "0" * 64,
    "SLACK_TOKEN=xoxb-your-token-here-please",
    "password_reset_timeout = 3600",
    "token_type = 'bearer'",
    'if password == user_password: return "ok"',
    "The password must contain at least 12 characters.",
    "publishable = 'pk_live_4eC39HqLyjWDarjtT1zdp7dc'",
    "pip install --index-url https://pypi.org/simple/ requests",
    "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
    "def check(password: str) -> bool:",
    "max_tokens: int = 4096",
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_false_positive_is_kept(text: str) -> None:
    result = redact(text)
    assert result.text == text, result.findings
    assert result.count == 0
    assert not has_secrets(text)


def test_private_key_block_keeps_markers_and_line_numbers() -> None:
    text = f"config:\n{PRIVATE_KEY}\nafter: 1\n"
    result = redact(text)
    assert result.text == (
        "config:\n-----BEGIN RSA PRIVATE KEY-----\n[REDACTED:private-key]\n\n"
        "-----END RSA PRIVATE KEY-----\nafter: 1\n"
    )
    assert result.text.count("\n") == text.count("\n")
    (finding,) = result.findings
    assert finding.rule == "private-key" and finding.line == 3


def test_cut_off_private_key_is_redacted_to_end_of_text() -> None:
    excerpt = "\n".join(PRIVATE_KEY.splitlines()[:2])
    result = redact(excerpt)
    assert result.text == "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED:private-key]"


def test_openssh_and_pgp_blocks() -> None:
    body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
    for kind in ("OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "PRIVATE KEY"):
        text = f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"
        assert body not in redact(text).text


def test_several_secrets_line_numbers_and_order() -> None:
    text = f"a = 1\nGITHUB_TOKEN={GH}\n\nkey=AKIAZ7Q2MXK4TR6W3PLN and {JWT}\n"
    result = redact(text)
    assert [(f.rule, f.line) for f in result.findings] == [
        ("github-token", 2),
        ("aws-access-key-id", 4),
        ("jwt", 4),
    ]
    assert result.count == 3
    starts = [f.start for f in result.findings]
    assert starts == sorted(starts)


def test_specific_rule_wins_over_generic() -> None:
    result = redact(f'token = "{GH}"')
    assert result.text == 'token = "[REDACTED:github-token]"'


def test_redaction_is_idempotent() -> None:
    text = "\n".join(t for _, t, _ in TRUE_POSITIVES) + "\n" + PRIVATE_KEY
    once = redact(text)
    assert once.count == len(TRUE_POSITIVES) + 1
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.count == 0


def test_crlf_text() -> None:
    result = redact(f"x\r\nGITHUB_TOKEN={GH}\r\ny\r\n")
    assert result.text == "x\r\nGITHUB_TOKEN=[REDACTED:github-token]\r\ny\r\n"
    assert result.findings[0].line == 2


def test_entropy() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("ab") == 1.0
    assert shannon_entropy("Qm9XkLp2Zr8Wv4Tn6Yb1") > 4.0


def test_large_text_is_fast_enough_to_not_hang() -> None:
    # Pathological-looking input for the assignment rule; must finish promptly
    # (pytest-timeout would flag a catastrophic backtrack).
    text = ("password_" * 2000 + "\n") * 20 + "token=" + "a-" * 5000
    assert redact(text).count == 0


def test_docstring_examples_run() -> None:
    result = doctest.testmod(redact_module)
    assert result.attempted > 0
    assert result.failed == 0


@given(
    st.lists(
        st.one_of(
            st.sampled_from([c.text for c in SECRETS + LOOKALIKES]),
            st.text(alphabet=st.characters(codec="utf-8"), max_size=80),
        ),
        max_size=6,
    )
)
@settings(max_examples=300, deadline=None)
def test_any_text_keeps_its_lines_and_redacting_twice_changes_nothing(parts: list[str]) -> None:
    """Whatever the text (random Unicode around real cases), redaction keeps every line
    break, finds nothing more in its own output, and removes every planted secret."""
    text = "\n".join(parts)
    once = redact(text)
    assert once.text.count("\n") == text.count("\n")
    assert redact(once.text).text == once.text
    for case in SECRETS:
        if case.text in parts:
            assert not [s for s in case.secrets if s in once.text]
    for f in once.findings:
        assert 0 <= f.start < f.end <= len(text)
        assert f.line == text.count("\n", 0, f.start) + 1


def test_non_ascii_text_keeps_offsets() -> None:
    """``str.lower`` lengthens some characters; keyword search must not shift offsets."""
    token = SECRETS[0].secrets[0]
    text = "İ" * 50 + "\nİstanbul_password = 'Zq1Xw2Ce3Vr4Bt5Ny6Mu7'\n" + f"GITHUB_TOKEN={token}\n"
    out = redact(text).text
    assert token not in out and "Zq1Xw2Ce3Vr4Bt5Ny6Mu7" not in out
    assert out.startswith("İ" * 50 + "\nİstanbul_password = '[REDACTED:generic-secret]'")


def test_redact_data_redacts_nested_values_and_line_lists() -> None:
    body = next(c for c in SECRETS if c.kind == "pem-rsa").secrets[0].split("\n")
    data = {"found": body[2:6], "args": {"content": SECRETS[0].text, "n": 1}, "t": (None,)}
    out = redact_data(data)
    assert out["args"]["n"] == 1 and out["t"] == (None,)
    assert SECRETS[0].secrets[0] not in out["args"]["content"]
    assert len(out["found"]) == 4 and not set(body) & set(out["found"])


def test_many_keyword_lines_in_a_large_text() -> None:
    # Each line holding a keyword is searched in place (no copy of the text per line);
    # a quadratic pass would run into pytest-timeout on this 1.4 MB text.
    text = ("api_key = 1\nx = 2\n" + "y = 3\n" * 9) * 20000 + "password ihPVvD4+0pl937\n"
    out = redact(text)
    assert [f.rule for f in out.findings] == ["generic-secret"]
    assert out.text.endswith("password [REDACTED:generic-secret]\n")


def test_real_agent_transcripts_have_nothing_redacted() -> None:
    """14 MB of real agent transcripts (vendored, no credentials in them): code, diffs,
    hashes, token counts and JSON-escaped tool output, nothing of which is a secret."""
    from _paths import REPO

    files = [p for p in (REPO / "tests" / "data" / "trajectories").rglob("*") if p.is_file()]
    assert len(files) > 40
    found = {
        p.name: [f.rule for f in redact(p.read_text(encoding="utf-8", errors="replace")).findings]
        for p in files
    }
    # The one known false redaction, kept visible: ``apiKey: 'ollama'`` (the dummy key
    # Ollama's OpenAI-compatible endpoint takes) is a lowercase word of two cl100k tokens,
    # read as a password a person chose; telling it apart needs the text around the value
    # (the same word inside ``ollamaBaseUrl``). docs/decisions.md says why it stays.
    known = {
        "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl": [
            "secret-value",
            "secret-value",
        ]
    }
    assert {k: v for k, v in found.items() if v} == known


@given(st.text(alphabet=st.characters(blacklist_categories=())))
@settings(max_examples=300, deadline=None)
def test_ascii_lowering_keeps_every_offset(text: str) -> None:
    """The lowered text the rules search must keep every character's offset: only ASCII
    letters change (str.lower turns "İ" into two characters), lone surrogates included."""
    import string

    from ctxnb.redaction.redactor import ascii_lower

    table = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
    assert ascii_lower(text) == text.translate(table)


def test_a_long_word_before_a_secret_name_is_redacted_in_linear_time() -> None:
    """A run of word characters (minified code, base64, a hash) on a line that also
    holds a secret-like name was scanned again from each of its characters: 64 KB took a
    minute. Run in a subprocess under a deadline the quadratic scan cannot meet."""
    import subprocess
    import sys

    code = (
        "from ctxnb.redaction.redactor import redact_text\n"
        "value = 'hunter' + '2hunter2'\n"
        "out = redact_text('y' * 400_000 + ' secret: ' + value + ' ' + 'z' * 400_000)\n"
        "assert value not in out and out.startswith('yyy'), out[-200:]\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_rule_loops_shortcuts_find_what_every_rule_run_in_full_finds():
    # _find skips a rule whose keywords are absent, or whose pattern (run over the whole
    # text) finds nothing, without its candidate generators: the spans must be those of
    # every rule run through _candidates, on secrets, look-alikes and their mixes.
    from ctxnb.redaction import redactor as redaction

    def reference(text: str) -> list[tuple[int, int, str]]:
        scan = redaction._Scan(text)
        taken: list[tuple[int, int, str]] = []
        for rule in redaction.RULES:
            low = scan.lowered
            if rule.keywords and not any(
                k in (low if k.islower() else text) for k in rule.keywords
            ):
                continue
            for start, end in redaction._candidates(rule, scan):
                if not any(start < b and a < end for a, b, _ in taken):
                    taken.append((start, end, rule.name))
        for start, end, name in redaction.structural_spans(scan):
            taken = [
                t
                for t in taken
                if not (start <= t[0] and t[1] <= end and t[2] in redaction._MERGEABLE)
                or (t[0], t[1]) == (start, end)
            ]
            for a, b in redaction._uncovered(start, end, taken):
                if b - a >= 3 and any(c.isalnum() for c in text[a:b]):
                    taken.append((a, b, name))
        return sorted(taken)

    texts = [c.text for c in SECRETS + LOOKALIKES]
    texts += ["\n".join(texts[i : i + 5]) for i in range(0, len(texts), 5)]
    texts += [t.upper() for t in texts[:40]] + [t.replace("\n", "\r\n") for t in texts[:40]]
    found = 0
    for text in texts:
        want = reference(text)
        assert redaction._find(text) == want, text[:200]
        found += bool(want)
    assert found > len(SECRETS) // 2  # the corpus does reach the rules


def test_the_trigger_words_are_found_alike_by_the_regex_and_by_in():
    # _find answers "no trigger word" for a short text with one regex search, for a long
    # one with the words' `in` tests: the same answer, for texts that hold each word at
    # the start, the middle and the end, in any case, and for texts that hold none.
    import random

    from ctxnb.redaction import redactor as redaction
    from ctxnb.redaction._patterns import TRIGGER_WORDS

    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 _./-:=\"'"
    texts = []
    for word in TRIGGER_WORDS:
        for _ in range(3):
            pad = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
            texts += [word + pad, pad + word.upper() + pad, pad + word]
    texts += [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 99))) for _ in range(500)
    ]
    for text in texts:
        low = text.lower()
        assert (redaction._TRIGGER.search(low) is not None) == any(w in low for w in TRIGGER_WORDS)
