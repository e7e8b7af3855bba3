"""False redactions in real prose and code: what a value *is* when it is no secret.

Docs and source code write ``name: value`` and ``name = value`` under secret words all
the time, and hold prose, code names and templates there. The corpus of
``tests/_prose_corpus.py`` is ctxnb's own docs, sources and two vendored data files,
read at test time (1,700+ paragraphs naming a secret word): no paragraph but the docs'
own examples of a secret may lose anything. Each family that leaked is then attacked
from both sides: the prose must stay, and a secret written the same way must still go.
Every secret here is generated (seeded), never real.
"""

from __future__ import annotations

import random
import string

import pytest
from _prose_corpus import EXAMPLE_SECRETS, false_redactions, prose_files, prose_pieces

from ctxnb.redaction import redact

_R = random.Random(4377)
AL = string.ascii_letters + string.digits


def rnd(n: int) -> str:
    while True:
        v = "".join(_R.choice(AL) for _ in range(n))
        if any(c.isdigit() for c in v) and any(c.isupper() for c in v):
            return v


S = rnd(18)
# Random letters only: the shape of an identifier glued by "_", not its words.
LETTERS = "".join(_R.choice(string.ascii_letters) for _ in range(30))
GH = "gh" + "p_" + rnd(36)


def test_no_false_redaction_in_ctxnb_docs_sources_and_vendored_prose() -> None:
    files = prose_files()
    looked, false = false_redactions(files, redact)
    # A corpus too small to fail would prove nothing.
    assert looked >= 1000
    where = [f"{p.path}:{p.line}: {hit}" for p, hit in false]
    assert not where, "redacted in prose (fix the rule, or add a real example):\n" + "\n".join(
        where
    )


def test_every_listed_example_is_a_secret_the_pass_redacts() -> None:
    # A paragraph holding a listed example is left out of the look-alikes: each example
    # must be redacted somewhere in the corpus, or the list would hide prose.
    files = prose_files()
    _, examples = prose_pieces(files)
    redacted = {
        files[p.path][f.start : f.end] for p in examples for f in redact(files[p.path]).findings
    }
    unused = [e for e in EXAMPLE_SECRETS if not any(e.strip("'\"") in r for r in redacted)]
    assert not unused


# (prose or code that must stay, a secret written the same way that must go)
PAIRS = [
    pytest.param(
        "  --no-token            serve without a token (loopback only)\n",
        f"ctxnb serve --api-token {S} --port 8\n",
        id="negated-flag-in-an-option-table",
    ),
    pytest.param(
        "Over HTTP a caller is its bearer token: give each client its own\n",
        f"auth:\n  token: {S}\n",
        id="sentence-after-a-colon",
    ),
    pytest.param(
        'raise Err(f"refusing to serve without a bearer token: anyone who can reach it")\n',
        f'headers = {{"token": "{S}"}}\n',
        id="sentence-in-a-string",
    ),
    pytest.param(
        "| `TiktokenCounter`: exact, needs `tiktoken` and the encoding file |\n",
        f"Set `TOKEN={S}` in the shell.\n",
        id="markdown-code-span-naming-a-symbol",
    ),
    pytest.param(
        "names the marker (a GitHub token under `token:` stays `github-token`)\n",
        f"the line `token: {S}` in config.yml\n",
        id="code-span-then-prose",
    ),
    pytest.param(
        '(`{"a":\nb}`, `` `token:` stays ``, and `api_key: str | None`)\n',
        f"```\ntoken: `{S}`\n```\n",
        id="double-backtick-span-opened-on-an-earlier-line",
    ),
    pytest.param(
        'auth = {"Authorization": f"Bearer {TOKEN}"}\n',
        f'auth = {{"Authorization": "Bearer {S}"}}\n',
        id="f-string-placeholder",
    ),
    pytest.param(
        'self.name = f"tiktoken:{encoding}"\nfmt = {"tokens_rel": "{:.3f}"}\n',
        f'url = f"https://x.org/?token={S}"\n',
        id="interpolation-and-format-spec",
    ),
    pytest.param(
        'groups=("secret", "bare"),\nSTRUCT = ("secret-value", "url-credentials")\n',
        f"define('DB_PASSWORD', '{S}');\n",
        id="tuple-of-strings-is-no-define",
    ),
    pytest.param(
        'if "password" not in lowered and "identified" not in lowered:\n',
        f"CREATE USER app WITH PASSWORD '{S}';\n",
        id="sql-keyword-inside-a-string",
    ),
    pytest.param(
        "user = AccessToken(token=caller, client_id=caller)\napp(token=tokens or None)\n",
        f'client = Client(token="{S}")\n',
        id="keyword-argument-holding-a-variable",
    ),
    pytest.param(
        "secret = text[start:end]\nTokenCounter = Callable[[str], int]\n",
        f"secret = {S}\n",
        id="subscript-and-generic-type",
    ),
    pytest.param(
        'df.astype({"turn": "int64", "tokens_before": "int64", "tokens_after": "int64"})\n',
        f'cfg = {{"user": "ops", "password": "{S}"}}\n',
        id="label-shared-by-several-keys",
    ),
    pytest.param(
        'token = "ghp_" + secrets.token_hex(18)\n',
        f'token = "{GH[:4]}" + "{GH[4:]}"\n',
        id="literal-prefix-of-a-computed-value",
    ),
    pytest.param(
        '{"auth": {"description": "Authentication capabilities supported by the client.",'
        ' "$ref": "#/$defs/AuthCapabilities"}}\n',
        f'{{"auth": {{"user": "ops", "password": "{S}"}}}}\n',
        id="json-schema-under-a-secret-key",
    ),
    pytest.param(
        '{"PASS_TO_PASS": ["t.py::test_a", "t.py::test_p[a(b)]"]}\n',
        f'{{"passwords": ["{S}"]}}\n',
        id="qualified-test-names",
    ),
    pytest.param(
        '_HELPERS = ("apiKeyHelper", "awsAuthRefresh")\n"HeuristicTokenCounter": '
        '"ctxnb.llm.tokens",\n',
        f'System.setProperty("HUGGINGFACE_TOKEN", "api_org_{LETTERS}")\n',
        id="identifier-against-random-letters-glued-by-underscore",
    ),
    pytest.param(
        "api_key: str | None,\ncounter: None if model else scripted_token_counter,\n",
        "DB_PASSWORD='Maple orbit12'\n",
        id="type-union-against-a-human-password",
    ),
    pytest.param(
        'return {"model": "m", "api_key": "unused"}\n',
        "password: Cobalt!meadow123\n",
        id="one-dictionary-word",
    ),
    pytest.param(
        "    tokenizer: replaces :func:`tokenize` entirely when given.\n",
        f"tokenizer_secret: {S}\n",
        id="tokenizer-is-not-token",
    ),
]


@pytest.mark.parametrize(("prose", "secret"), PAIRS)
def test_prose_stays_and_a_secret_written_the_same_way_goes(prose: str, secret: str) -> None:
    assert redact(prose).text == prose
    red = redact(secret).text
    assert "[REDACTED:" in red, secret
    for word in (S, GH[4:], "Maple orbit12", "Cobalt!meadow123", LETTERS):
        if word in secret:
            assert word not in red, red
