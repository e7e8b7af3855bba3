"""Redaction: recall, false redactions and throughput, against detect-secrets in the same run.

1. Writes the secret corpus of ``tests/_secret_corpus.py`` (generated secrets of many
   kinds, one file each, and look-alikes) to a temp dir and scans every file with
   ctxnb's ``redact`` and with detect-secrets' default plugins and filters
   (``SecretsCollection.scan_file``).
   - ctxnb catches a case when no secret of it is left in the redacted text.
   - detect-secrets catches a case when it reports a finding on a line of each secret
     (line-level, as it reports; generous to it: a line flag hides the whole line), or
     for a key block on its BEGIN line.
   - A look-alike is a false redaction when anything in it is redacted (ctxnb) or
     reported (detect-secrets).
2. The same on the held-out corpus of ``tests/_heldout_spec.py`` (realistic files written
   from a spec, not from the rules; #29), counted per secret value: recall, false
   redactions among its look-alikes, and MB/s of both tools on those files.
3. Throughput in MB/s on the standard library corpus (``bench/_corpus.py``): ctxnb on
   every text file, and both tools on the same first ``--ds-mb`` megabytes (detect-secrets
   is slow), each reading the files itself.
4. (#43) Generalisation, at every exit (``bench/_redact_exits.py``: the redact pass,
   read_file, search, the assembled context, a governed command's output, the trace
   ledger and audit log of a write, MCP over stdio): recall on the held-out shapes of
   ``tests/_heldout_shapes.py`` (written before the rules, never used to tune them) and
   on a corpus generated the way gitleaks validates its rules
   (``bench/_generated_corpus.py``), false redactions per look-alike of both. The same
   figures for the detector before #43 (``--baseline-ref``, its ``ctxnb/`` extracted with
   ``git archive`` and run in a subprocess) at the redact pass, and throughput in MB/s of
   both on the standard library and on the held-out files, in the same run.

Run: ``python bench/redact.py [--ds-mb 8] [--only 43] [--exits redact,read,...]``. Needs
``detect-secrets`` (a dev dependency) for 1-3, hypothesis for the generated corpus.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import stdlib_dir  # noqa: E402
from _heldout_spec import heldout_cases  # noqa: E402
from _secret_corpus import LOOKALIKES, SECRETS, write_corpus  # noqa: E402

from ctxnb.redaction.redactor import _redact as _redact_uncached  # noqa: E402
from ctxnb.redaction.redactor import redact  # noqa: E402


def detect_secrets_lines(path: Path) -> set[int]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    found = SecretsCollection()
    with default_settings():
        found.scan_file(str(path))
    return {s.line_number for ss in found.data.values() for s in ss}


def secret_lines(case: Any) -> list[set[int]]:
    """For each secret, the 1-based lines it covers in the case's text (and, for a key
    body, its BEGIN line above, which is where detect-secrets reports a key)."""
    out = []
    for s in case.secrets:
        start = case.text.index(s)
        first = case.text.count("\n", 0, start) + 1
        lead = 1 if "\n" in s else 0
        out.append(set(range(first - lead, first + s.count("\n") + 1)))
    return out


def accuracy() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        written = write_corpus(Path(tmp))
        ours_missed, ds_missed, ours_false, ds_false = [], [], [], []
        for path, case in written:
            text = path.read_text(encoding="utf-8")
            red = redact(text).text
            ds = detect_secrets_lines(path)
            if case.secrets:
                if any(s in red for s in case.secrets):
                    ours_missed.append(case.kind)
                if not all(lines & ds for lines in secret_lines(case)):
                    ds_missed.append(case.kind)
            else:
                if red != text:
                    ours_false.append(case.kind)
                if ds:
                    ds_false.append(case.kind)
    n, m = len(SECRETS), len(LOOKALIKES)
    kinds = len({c.kind for c in SECRETS})
    print(f"corpus: {n} secrets of {kinds} kinds, {m} look-alikes")
    for name, missed, false in (
        ("ctxnb redact", ours_missed, ours_false),
        ("detect-secrets", ds_missed, ds_false),
    ):
        print(
            f"  {name:15s} recall {100 * (n - len(missed)) / n:5.1f}% "
            f"({n - len(missed)}/{n}), false redactions {len(false)}/{m}"
        )
        print(f"    missed: {sorted(set(missed)) or '-'}")
        print(f"    false:  {sorted(set(false)) or '-'}")


def heldout() -> None:
    secrets, lookalikes = heldout_cases()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, case in enumerate([*secrets, *lookalikes]):
            path = Path(tmp) / f"{i:03d}" / Path(case.name).name
            path.parent.mkdir()
            path.write_text(case.text, encoding="utf-8")
            paths.append((path, case))
        n = sum(len(c.secrets) for c in secrets)
        size = sum(p.stat().st_size for p, _ in paths)
        ours_missed, ours_false, t0 = [], [], time.perf_counter()
        for path, case in paths:
            text = path.read_text(encoding="utf-8")
            red = redact(text).text
            ours_missed += [case.kind for s in case.secrets if s in red]
            if not case.secrets and red != text:
                ours_false.append(case.kind)
        ours_dt = time.perf_counter() - t0
        ds_missed, ds_false, t0 = [], [], time.perf_counter()
        for path, case in paths:
            ds = detect_secrets_lines(path)
            ds_missed += [case.kind for lines in secret_lines(case) if not lines & ds]
            if not case.secrets and ds:
                ds_false.append(case.kind)
        ds_dt = time.perf_counter() - t0
    print(
        f"held-out corpus (#29): {n} secrets in {len(secrets)} files, "
        f"{len(lookalikes)} look-alikes, {size / 1e3:.0f} kB"
    )
    for name, missed, false, dt in (
        ("ctxnb redact", ours_missed, ours_false, ours_dt),
        ("detect-secrets", ds_missed, ds_false, ds_dt),
    ):
        print(
            f"  {name:15s} recall {100 * (n - len(missed)) / n:5.1f}% ({n - len(missed)}/{n}), "
            f"false redactions {len(false)}/{len(lookalikes)}, {size / 1e6 / dt:6.2f} MB/s"
        )
        print(f"    missed: {sorted(set(missed)) or '-'}")
        print(f"    false:  {sorted(set(false)) or '-'}")


def stdlib_files() -> list[Path]:
    files = []
    for p in sorted(stdlib_dir().rglob("*")):
        if "site-packages" in p.parts or "__pycache__" in p.parts or not p.is_file():
            continue
        if p.suffix in (".py", ".txt", ".rst", ".cfg", ".toml", ".json", ".pem", ".html"):
            files.append(p)
    return files


def time_ours(files: list[Path]) -> tuple[float, int, int]:
    size = findings = 0
    t0 = time.perf_counter()
    for p in files:
        data = p.read_bytes()
        size += len(data)
        findings += redact(data.decode("utf-8", "replace")).count
    return time.perf_counter() - t0, size, findings


def time_ds(files: list[Path]) -> tuple[float, int, int]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    size = 0
    found = SecretsCollection()
    t0 = time.perf_counter()
    with default_settings():
        for p in files:
            size += p.stat().st_size
            found.scan_file(str(p))
    return time.perf_counter() - t0, size, sum(len(v) for v in found.data.values())


def throughput(ds_mb: float) -> None:
    files = stdlib_files()
    sub, total = [], 0
    for p in files:
        if total >= ds_mb * 1e6:
            break
        sub.append(p)
        total += p.stat().st_size
    dt, size, hits = time_ours(files)
    print(f"throughput on the standard library ({len(files)} files, {size / 1e6:.1f} MB):")
    print(f"  ctxnb redact    {size / 1e6 / dt:7.2f} MB/s ({hits} findings)")
    ours, size, hits = time_ours(sub)
    ds, ds_size, ds_hits = time_ds(sub)
    print(f"  same first {size / 1e6:.1f} MB ({len(sub)} files):")
    print(f"  ctxnb redact    {size / 1e6 / ours:7.2f} MB/s ({hits} findings)")
    print(f"  detect-secrets  {ds_size / 1e6 / ds:7.2f} MB/s ({ds_hits} findings)")
    print(f"  ratio ctxnb / detect-secrets: {ds / ours:.1f}x")


# ------------------------------------------------------------------------------ #43
#: The detector before #43 point 6 (the main branch when the work began).
BASELINE_REF = "4967b14"
EXITS = ("redact", "read", "search", "context", "command", "trace+audit", "mcp")

_BASELINE_SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ctxnb.redaction.redactor import redact
job = json.load(open(sys.argv[2]))
from ctxnb.redaction.redactor import _redact
out = {"texts": [redact(t).text for t in job["texts"]]}
for name, files in job["timed"].items():
    size, t0 = 0, time.perf_counter()
    for f in files:
        data = open(f, "rb").read()
        size += len(data)
        _redact(data.decode("utf-8", "replace"))
    out[name] = size / 1e6 / (time.perf_counter() - t0)
print(json.dumps(out))
"""


def baseline(ref: str, texts: list[str], timed: dict[str, list[str]]) -> dict[str, Any]:
    """Redact ``texts`` and time ``timed`` file lists with the detector at ``ref``."""
    import json
    import subprocess

    with tempfile.TemporaryDirectory(prefix="ctxnb-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "archive", ref, "ctxnb"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"texts": texts, "timed": timed}))
        res = subprocess.run(
            [sys.executable, "-c", _BASELINE_SCRIPT, tmp, str(job)],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        return dict(json.loads(res.stdout))


def _score(cases: list[Any], outs: list[str]) -> tuple[int, int, list[str]]:
    from _redact_exits import leaked

    missed = [c.kind for c, o in zip(cases, outs, strict=True) for s in c.secrets if leaked(o, s)]
    return sum(len(c.secrets) for c in cases), len(missed), missed


def generalisation(exits: tuple[str, ...], ref: str, stdlib: list[Path]) -> None:
    from _generated_corpus import generated_cases
    from _heldout_shapes import heldout_shapes
    from _redact_exits import run_exits

    t0 = time.perf_counter()
    corpora = {"held-out shapes (#43)": heldout_shapes(), "gitleaks-generated": generated_cases()}
    print(f"(#43) corpora made in {time.perf_counter() - t0:.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        held_files = []
        sec, look = corpora["held-out shapes (#43)"]
        for i, case in enumerate([*sec, *look]):
            p = Path(tmp) / f"{i:03d}.txt"
            p.write_text(case.text, encoding="utf-8")
            held_files.append(str(p))
        texts = [c.text for s, lk in corpora.values() for c in [*s, *lk]]
        timed = {"stdlib": [str(p) for p in stdlib], "held-out": held_files}
        # The tokenizer loads once per process, at the first candidate: timed apart.
        from ctxnb.redaction import _efficiency

        t1 = time.perf_counter()
        _efficiency.count_tokens("warm")
        load = time.perf_counter() - t1
        # Two rounds, the detector before #43 and ctxnb alternating; the best of each.
        ours: dict[str, float] = {}
        base: dict[str, Any] = {}
        for _ in range(2):
            b = baseline(ref, texts, timed)
            base = {**b, **{k: max(b[k], base.get(k, 0.0)) for k in timed}}
            for name, files in timed.items():
                size, t1 = 0, time.perf_counter()
                for f in files:
                    data = Path(f).read_bytes()
                    size += len(data)
                    _redact_uncached(data.decode("utf-8", "replace"))
                ours[name] = max(ours.get(name, 0.0), size / 1e6 / (time.perf_counter() - t1))
    print(f"tokenizer ({_efficiency.backend()}) loaded in {load:.2f} s, once per process")
    base_texts = iter(base["texts"])
    for title, (sec, look) in corpora.items():
        print(f"{title}: {sum(len(c.secrets) for c in sec)} secrets in {len(sec)} files, "
              f"{len(look)} look-alikes")  # fmt: skip
        b_sec = [next(base_texts) for _ in sec]
        b_look = [next(base_texts) for _ in look]
        n, m, missed = _score(sec, b_sec)
        false = [c.kind for c, o in zip(look, b_look, strict=True) if o != c.text]
        print(f"  {'before #43 (' + ref + ')':24s} redact   recall {100 * (n - m) / n:5.1f}% "
              f"({n - m}/{n}), false {len(false)}/{len(look)}")  # fmt: skip
        t1 = time.perf_counter()
        outs = run_exits([*sec, *look], exits)
        for exit_name in exits:
            o_sec, o_look = outs[exit_name][: len(sec)], outs[exit_name][len(sec) :]
            n, m, missed = _score(sec, o_sec)
            false = [c.kind for c, o in zip(look, o_look, strict=True) if "[REDACTED:" in o]
            print(f"  {'ctxnb':24s} {exit_name:11s} recall {100 * (n - m) / n:5.1f}% "
                  f"({n - m}/{n}), false {len(false)}/{len(look)} "
                  f"(1 per {len(look) / max(len(false), 1):.0f})")  # fmt: skip
            if missed or false:
                print(f"      missed: {sorted(set(missed))[:12]}; false: {sorted(set(false))}")
        print(f"  exits driven in {time.perf_counter() - t1:.0f} s")
    for name in ("stdlib", "held-out"):
        print(f"throughput ({name}, uncached, best of 2): ctxnb {ours[name]:.2f} MB/s, "
              f"before #43 {base[name]:.2f} MB/s, ratio {ours[name] / base[name]:.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ds-mb", type=float, default=8.0, help="MB both tools scan for the ratio")
    ap.add_argument("--only", choices=["43"], help="run only the #43 generalisation part")
    ap.add_argument("--exits", default=",".join(EXITS), help="comma-separated exits to drive")
    ap.add_argument("--baseline-ref", default=BASELINE_REF, help="the detector to compare")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    if args.only != "43":
        accuracy()
        heldout()
        throughput(args.ds_mb)
    generalisation(tuple(args.exits.split(",")), args.baseline_ref, stdlib_files())


if __name__ == "__main__":
    main()
