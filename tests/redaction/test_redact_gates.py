"""The cheap tests that decide which reader runs must never hide a secret.

Readers look for their literal (``kind:``, ``ENV``, ``variable "``, ``password``, a
client's name, a backslash, a percent sign, a tab) on the lines holding a secret word,
or test one character before a longer string, instead of scanning the whole text for
each. Each case here hides one family deep in a long text (past the short-text path)
of ordinary code whose own characters (backslashes, percent signs, tabs, ``ENV`` in
prose) trip the early tests, and asks that the secret still goes. Secrets are generated.
"""

from __future__ import annotations

import json
import random
import string
from urllib.parse import quote

import pytest

from ctxnb.redaction import redact

_R = random.Random(4391)


def rnd(n: int) -> str:
    al = string.ascii_letters + string.digits
    while True:
        v = "".join(_R.choice(al) for _ in range(n))
        if any(c.isdigit() for c in v) and any(c.isupper() for c in v):
            return v


S = rnd(16)
A, B = rnd(9), rnd(9)
FILLER = 'def render(row):\n    return "%s\\t%d" % (row.name, row.count)  # ENVIRONMENT\n\n' * 60

FAMILIES = [
    ("k8s-secret", f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  pw: {S}\n"),
    ("terraform", f'variable "db_password" {{\n  default = "{S}"\n}}\n'),
    ("dockerfile", f"FROM python:3.12\nENV API_TOKEN {S}\nRUN make\n"),
    ("properties-continuation", f"db.password=\\\n    {A}\\\n    {B}\n"),
    ("sql-password", f"alter role app with login password '{S}';\n"),
    ("sql-identified", f"CREATE USER app IDENTIFIED BY {S};\n"),
    ("rabbitmq-positional", f"rabbitmqctl add_user deployer {S}\n"),
    ("sqlplus-positional", f"sqlplus -s scott/{S}@db @run.sql\n"),
    ("tab-separated-flag", f"mysql\t-uroot\t-p{S}\tshop\n"),
    ("xfreerdp", f"xfreerdp /v:host /u:admin /p:{S}\n"),
    ("escaped-quote", json.dumps({"src": f'api_key = "{S}"'}) + "\n"),
    ("escaped-url", json.dumps({"u": f"https://ops:{S}@db.lan/x"}).replace("/", "\\/") + "\n"),
    ("percent-url", f"next={quote(f'https://ops:{S}@db.lan/x', safe='')}\n"),
]


@pytest.mark.parametrize(("family", "snippet"), FAMILIES, ids=[f for f, _ in FAMILIES])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_secret_deep_in_a_long_text_is_still_found(family: str, snippet: str, where: str) -> None:
    text = {
        "start": snippet + FILLER,
        "middle": FILLER + snippet + FILLER,
        "end": FILLER + snippet,
    }[where]
    assert len(text) > 4096
    red = redact(text).text
    for secret in (S, A, B):
        if secret in snippet:
            assert secret not in red, family
    assert red.count("[REDACTED:") >= 1
