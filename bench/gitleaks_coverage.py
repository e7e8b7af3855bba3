"""How many of gitleaks' 222 rules does ctxnb's redaction cover?

For each rule of gitleaks' default configuration (``bench/data/gitleaks/gitleaks.toml``,
vendored with its licence), samples are made the way gitleaks validates its own rules
(``cmd/generate/config/utils``): a random string that the rule's regex matches gives the
secret (its ``secretGroup``, else its first group, else the whole match) when that secret
looks random (the rule's ``entropy``, at least 3 bits a character where its length
allows: gitleaks' samples are random strings); it is then written in the forms of gitleaks'
``GenerateSampleSecrets`` (INI, JSON, YAML, XML, C#, Go, Java, Kotlin, PHP, Python,
logstash, Makefile …) under an identifier taken from the rule's first keyword. A sample
is caught when ``ctxnb.redaction.redactor.redact`` leaves none of the secret's text in place. A
rule is covered when at least 90% of its samples are caught.

Random strings come from hypothesis' ``from_regex`` over printable ASCII, derandomized, so
every run makes the same samples. Rules whose regex Python cannot read are counted apart.
The reference in the same run: detect-secrets on the same samples (one secret per rule,
every form), covered by the same 90% rule.

Usage: python bench/gitleaks_coverage.py [--secrets 4] [--list]
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import tempfile
import time
import tomllib
import warnings
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxnb.redaction.redactor import redact

CONFIG = Path(__file__).resolve().parent / "data" / "gitleaks" / "gitleaks.toml"
COVERED = 0.9

# gitleaks' GenerateSampleSecrets forms ({i} identifier, {I} upper-cased, {s} secret).
FORMS = [
    '{i}Token="{s}"',
    '{i}Token = "{s}"',
    "{i}Token={s}",
    "{i}Token = {s}",
    '{\n    "{i}_token": "{s}"\n}',
    '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}',
    "<{i}Token>\n    {s}\n</{i}Token>",
    "{i}_token: {s}",
    "{i}_token: '{s}'",
    '{i}_token: "{s}"',
    'string {i}Token = "{s}";',
    'var {i}Token string = "{s}"',
    '{i}Token := "{s}"',
    "{i}Token := `{s}`",
    'String {i}Token = "{s}";',
    'var {i}Token = "{s}"',
    '${i}Token .= "{s}"',
    "{i}Token = '{s}'",
    '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")',
    '  "{i}Token" => "{s}"',
    '{i}_TOKEN = "{s}"',
    '{i}_TOKEN := "{s}"',
    '{i}_TOKEN ::= "{s}"',
    '{i}_TOKEN :::= "{s}"',
    '{i}_TOKEN ?= "{s}"',
]

ASCII = st.characters(codec="ascii", exclude_categories=["Cc"], include_characters="\t\n\r")


def _python_regex(go: str) -> str:
    """RE2 spellings Python reads differently: ``\\z``, and a flag group such as
    ``(?i)`` after the start, which RE2 applies to the rest of the enclosing group
    (Python only at the start): it becomes a scoped ``(?i:…)`` up to that group's end."""
    rx = go.replace(r"\z", r"\Z")
    while True:
        m = re.search(r"(?<!^)\(\?([a-z]+)\)", rx)
        if m is None:
            return rx
        depth, i, in_class = 0, m.end(), False
        while i < len(rx):
            c = rx[i]
            if c == "\\":
                i += 2
                continue
            if in_class:
                in_class = c != "]"
            elif c == "[":
                in_class = True
            elif c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            i += 1
        rx = rx[: m.start()] + f"(?{m.group(1)}:" + rx[m.end() : i] + ")" + rx[i:]


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values()) if n else 0.0


def secrets_for(rule: dict, count: int) -> list[str]:
    """``count`` distinct secrets the rule's regex finds in strings it matches."""
    rx = re.compile(_python_regex(rule["regex"]))
    group = rule.get("secretGroup") or (1 if rx.groups else 0)
    # gitleaks' samples are random strings (secrets.NewSecret): ask for a random-looking
    # one too, not hypothesis' simplest ("0000…"), whatever the rule's own threshold.
    floor = max(float(rule.get("entropy", 0)), 3.0)
    found: list[str] = []

    @settings(
        max_examples=count * 25,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.from_regex(rx, alphabet=ASCII))
    def collect(text: str) -> None:
        if len(found) >= count:
            return
        m = rx.search(text)
        if m is None:
            return
        secret = m.group(group) or ""
        need = min(floor, math.log2(max(len(secret), 2)) - 0.5)
        if len(secret) >= 8 and entropy(secret) >= need and secret not in found:
            found.append(secret)

    collect()
    return found


def detect_secrets_caught(texts: list[tuple[str, str]], tmp: Path) -> list[bool]:
    """For each (text, secret): whether detect-secrets reports a line the secret is on
    (one file per text: it reports a secret once per file)."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    out = []
    for n, (text, secret) in enumerate(texts):
        at = text.index(secret)
        first = 1 + text.count("\n", 0, at)
        span = set(range(first, first + secret.count("\n") + 1))
        path = tmp / f"sample{n}.txt"
        path.write_text(text + "\n")
        found = SecretsCollection()
        with default_settings():
            found.scan_file(str(path))
        out.append(bool(span & {s.line_number for ss in found.data.values() for s in ss}))
    return out


def identifier(rule: dict) -> str:
    words = [k for k in rule.get("keywords", []) if re.fullmatch(r"[a-z][a-z0-9]+", k)]
    return words[0] if words else rule["id"].split("-")[0]


def main() -> None:
    warnings.simplefilter("ignore", FutureWarning)  # RE2 classes Python reads with a note
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secrets", type=int, default=4, help="secrets per rule")
    ap.add_argument("--list", action="store_true", help="list the rules not covered")
    ns = ap.parse_args()
    rules = tomllib.loads(CONFIG.read_text())["rules"]
    t0 = time.perf_counter()
    covered, partial, missed, unreadable, unsampled = [], [], [], [], []
    samples_total = caught_total = 0
    # The same-run reference: one secret per rule in every form, ctxnb and detect-secrets.
    first = {"ctxnb": 0, "detect-secrets": 0}
    first_samples = {"ctxnb": 0, "detect-secrets": 0, "all": 0}
    tmp = Path(tempfile.mkdtemp(prefix="ctxnb-gitleaks-"))
    for rule in rules:
        try:
            secrets = secrets_for(rule, ns.secrets)
        except re.error as exc:
            unreadable.append((rule["id"], str(exc)[:60]))
            continue
        except Exception:  # hypothesis cannot draw from this regex
            secrets = []
        if not secrets:
            unsampled.append(rule["id"])
            continue
        ident = identifier(rule)
        texts = [
            (f.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secrets[0]),
             secrets[0])
            for f in FORMS
        ]  # fmt: skip
        ours = [secret not in redact(text).text for text, secret in texts]
        theirs = detect_secrets_caught(texts, tmp)
        first["ctxnb"] += sum(ours) / len(ours) >= COVERED
        first["detect-secrets"] += sum(theirs) / len(theirs) >= COVERED
        first_samples["ctxnb"] += sum(ours)
        first_samples["detect-secrets"] += sum(theirs)
        first_samples["all"] += len(texts)
        n = caught = 0
        for secret in secrets:
            for form in FORMS:
                text = form.replace("{i}", ident).replace("{I}", ident.upper())
                text = text.replace("{s}", secret)
                n += 1
                caught += secret not in redact(text).text
        samples_total += n
        caught_total += caught
        share = caught / n
        (covered if share >= COVERED else partial if share >= 0.5 else missed).append(
            (rule["id"], share)
        )
    sampled = len(covered) + len(partial) + len(missed)
    print(f"gitleaks rules: {len(rules)} (bench/data/gitleaks/gitleaks.toml)")
    print(f"  sampled: {sampled}; regex not readable by Python: {len(unreadable)}; "
          f"no sample reaching the rule's entropy: {len(unsampled)}")  # fmt: skip
    print(f"  covered (>= {COVERED:.0%} of samples redacted): {len(covered)} of {sampled} "
          f"({len(covered) / max(sampled, 1):.1%})")  # fmt: skip
    print(f"  partly (50-90%): {len(partial)}; missed (< 50%): {len(missed)}")
    share = caught_total / max(samples_total, 1)
    print(f"  samples redacted: {caught_total} of {samples_total} ({share:.1%}); "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    print(f"  one secret per rule, same samples: covered by ctxnb {first['ctxnb']}, "
          f"by detect-secrets {first['detect-secrets']} of {sampled} "
          f"(ratio {first['ctxnb'] / max(first['detect-secrets'], 1):.1f}x)")  # fmt: skip
    n = max(first_samples["all"], 1)
    print(f"    samples found: ctxnb {first_samples['ctxnb'] / n:.1%}, detect-secrets "
          f"{first_samples['detect-secrets'] / n:.1%} of {first_samples['all']}")  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)
    if ns.list:
        for rid, share in sorted(partial + missed, key=lambda r: r[1]):
            print(f"    {share:6.1%}  {rid}")
        for rid, why in unreadable:
            print(f"    unreadable  {rid}: {why}")
        for rid in unsampled:
            print(f"    unsampled   {rid}")


if __name__ == "__main__":
    main()
