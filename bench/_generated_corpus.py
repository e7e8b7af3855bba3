"""A redaction corpus generated the way gitleaks validates its rules (bench/redact.py, #43).

True positives: for each rule of gitleaks' default configuration (vendored in
``bench/data/gitleaks/gitleaks.toml``), a random string its regex matches gives the
secret (``bench/gitleaks_coverage.py``'s ``secrets_for``: hypothesis' ``from_regex``,
derandomized), written in a few of gitleaks' ``GenerateSampleSecrets`` forms (INI, JSON,
YAML, XML, Go, PHP, Make …) under an identifier from the rule's keywords.

Look-alikes, as gitleaks' rule tests list false positives: random draws of the shapes a
secret scanner must leave alone, written where code and configuration hold them:
hashes (MD5, SHA-1, SHA-256 hex; SHA-512 integrity strings), UUIDs, base64 of ordinary
text, file paths (also under names such as ``token_path``), and camelCase identifiers
(also as the code on the right of ``password =``).

``generated_cases()`` returns ``(secrets, lookalikes)`` of :class:`GenCase`.
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
import tomllib
import uuid
import warnings
from dataclasses import dataclass

from gitleaks_coverage import CONFIG, FORMS, identifier, secrets_for


@dataclass(frozen=True)
class GenCase:
    kind: str
    name: str
    text: str
    secrets: tuple[str, ...] = ()


SENTENCES = [
    "The quick brown fox jumps over the lazy dog",
    "Release notes for the spring update of the billing service",
    "Please review the attached quarterly report before Friday",
    "All systems operational, no incidents reported this week",
    "Meeting moved to room 4B because of the fire drill",
]
WORDS = [
    "user", "account", "session", "order", "invoice", "report", "cache", "region",
    "bucket", "handler", "service", "client", "request", "profile", "config", "policy",
]  # fmt: skip


def _camel(r: random.Random, n: int = 3) -> str:
    ws = r.sample(WORDS, n)
    return ws[0] + "".join(w.capitalize() for w in ws[1:])


def _lookalikes(r: random.Random, per_kind: int) -> list[GenCase]:
    out: list[GenCase] = []

    def add(kind: str, name: str, text: str) -> None:
        out.append(GenCase(kind, name, text))

    for i in range(per_kind):
        blob = r.randbytes(64)
        md5, sha1 = hashlib.md5(blob).hexdigest(), hashlib.sha1(blob).hexdigest()
        sha256 = hashlib.sha256(blob).hexdigest()
        integrity = base64.b64encode(hashlib.sha512(blob).digest()).decode()
        pick = i % 5
        add("hash", "hashes.txt", [
            f'checksum = "{sha256}"\n',
            f"commit {sha1}\nAuthor: Dev <dev@example.org>\n",
            f'{{"etag": "{md5}", "size": {r.randrange(100, 9999)}}}\n',
            f'"integrity": "sha512-{integrity}"\n',
            f"{sha256}  dist/app-{r.randrange(1, 9)}.{r.randrange(0, 20)}.tar.gz\n",
        ][pick])  # fmt: skip
        u = str(uuid.UUID(int=r.getrandbits(128), version=4))
        add("uuid", "ids.yaml", [
            f"request_id: {u}\n",
            f'{{"tenantId": "{u}"}}\n',
            f'CLIENT_ID="{u}"\n',
            f"trace {u} finished in {r.randrange(5, 900)} ms\n",
            f"  - id: {u}\n    name: {r.choice(WORDS)}\n",
        ][pick])  # fmt: skip
        b = base64.b64encode(r.choice(SENTENCES).encode()).decode()
        add("base64-text", "payload.json", [
            f'{{"body": "{b}"}}\n',
            f"data:\n  motd: {b}\n",
            f'message = "{b}"\n',
            f"payload={b}\n",
            f"<content>{b}</content>\n",
        ][pick])  # fmt: skip
        p = "/" + "/".join(r.sample(WORDS, 3)) + r.choice([".pem", ".key", ".json", ".txt", ""])
        add("file-path", "paths.cfg", [
            f'token_path = "{p}"\n',
            f"ssl_key_file: {p}\n",
            f"PRIVATE_KEY_PATH={p}\n",
            f"loading {p} from cache\n",
            f'secret_file: "/run/secrets{p}"\n',
        ][pick])  # fmt: skip
        c = _camel(r)
        add("camelcase", "code.ts", [
            f"const authToken = await fetch{c[0].upper() + c[1:]}Token({r.choice(WORDS)}Id);\n",
            f"password = get{c[0].upper() + c[1:]}Password()\n",
            f"secretKey: this.{c}SecretKey,\n",
            f"const {c}TokenRefreshHandler = create{c[0].upper() + c[1:]}();\n",
            f"apiKey = {c}ApiKey\n",
        ][pick])  # fmt: skip
    return out


def generated_cases(
    *, per_rule: int = 1, forms: int = 3, lookalikes_per_kind: int = 40, seed: int = 4343
) -> tuple[list[GenCase], list[GenCase]]:
    """The generated true positives and look-alikes."""
    warnings.simplefilter("ignore", FutureWarning)  # RE2 classes Python reads with a note
    r = random.Random(seed)
    rules = tomllib.loads(CONFIG.read_text())["rules"]
    secrets: list[GenCase] = []
    for rule in rules:
        try:
            found = secrets_for(rule, per_rule)
        except re.error:
            continue
        except Exception:  # hypothesis cannot draw from this regex
            continue
        ident = identifier(rule)
        for secret in found:
            for form in r.sample(FORMS, forms):
                text = form.replace("{i}", ident).replace("{I}", ident.upper())
                text = text.replace("{s}", secret)
                secrets.append(GenCase(rule["id"], "sample.txt", text, (secret,)))
    return secrets, _lookalikes(r, lookalikes_per_kind)
