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

5. False redactions on real prose and code (``tests/_prose_corpus.py``: ctxnb's README,
   docs and sources and two vendored JSON files, by paragraph), for ctxnb, the detector
   before #43 and the pass before prose was read as prose (``PROSE_BEFORE_REF``).

Run: ``python bench/redact.py [--ds-mb 8] [--only 43|prose] [--exits redact,read,...]``. Needs
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
import json, sys
sys.path.insert(0, sys.argv[1])
from ctxnb.redaction.redactor import redact
job = json.load(open(sys.argv[2]))
done = [redact(t) for t in job["texts"]]
print(json.dumps({"texts": [r.text for r in done],
                  "spans": [[(f.start, f.end) for f in r.findings] for r in done]}))
"""
# Each detector is timed in a fresh process of its own (ctxnb's copy too): timed inside
# this one, ctxnb would pay for the corpora, the exits and hypothesis on its heap (a
# garbage collector walking them) and the detector before would not. CPU time of the
# process is reported beside wall time: on a machine shared with other jobs, wall time
# moves by half between identical runs, CPU time by a few percent.
_TIMING_SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ctxnb.redaction.redactor import _redact
job = json.load(open(sys.argv[2]))
texts = {n: [open(f, "rb").read().decode("utf-8", "replace") for f in fs]
         for n, fs in job["timed"].items()}
try:
    from ctxnb.redaction import _efficiency
    _efficiency.count_tokens("warm")  # the tokenizer loads once per process: apart
except ImportError:
    pass  # the detector before token efficiency
out = {}
for name, ts in texts.items():
    size = sum(len(t.encode("utf-8")) for t in ts)
    c0, w0 = time.process_time(), time.perf_counter()
    for t in ts:
        _redact(t)
    out[name] = {"cpu": size / 1e6 / (time.process_time() - c0),
                 "wall": size / 1e6 / (time.perf_counter() - w0)}
print(json.dumps(out))
"""


def _extract(ref: str, into: Path) -> None:
    import subprocess

    archive = subprocess.run(
        ["git", "archive", ref, "ctxnb"], cwd=REPO, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def timed_pair(
    ref: str, timed: dict[str, list[str]], rounds: int = 3
) -> dict[str, dict[str, dict[str, float]]]:
    """MB/s (CPU and wall) of this checkout's ``_redact`` and of the one at ``ref`` on
    each file list, each in a fresh process, alternating, the best of ``rounds`` each."""
    import json
    import subprocess

    best: dict[str, dict[str, dict[str, float]]] = {"ctxnb": {}, "before": {}}
    with tempfile.TemporaryDirectory(prefix="ctxnb-timing-") as tmp:
        _extract(ref, Path(tmp))
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"timed": timed}))
        for _ in range(rounds):
            for who, root in (("before", tmp), ("ctxnb", str(REPO))):
                res = subprocess.run(
                    [sys.executable, "-c", _TIMING_SCRIPT, root, str(job)],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=tmp,
                )
                for name, figs in json.loads(res.stdout).items():
                    mine = best[who].setdefault(name, {"cpu": 0.0, "wall": 0.0})
                    for k in ("cpu", "wall"):
                        mine[k] = max(mine[k], figs[k])
    return best


def baseline(ref: str, texts: list[str]) -> dict[str, Any]:
    """Redact ``texts`` with the detector at ``ref``."""
    import json
    import subprocess

    with tempfile.TemporaryDirectory(prefix="ctxnb-baseline-") as tmp:
        _extract(ref, Path(tmp))
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"texts": texts}))
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
        from ctxnb.redaction import _efficiency

        t1 = time.perf_counter()
        _efficiency.count_tokens("warm")
        load = time.perf_counter() - t1
        base = baseline(ref, texts)
        speed = timed_pair(ref, timed)
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
        o, b = speed["ctxnb"][name], speed["before"][name]
        print(f"throughput ({name}, uncached, each in its own process, best of 3): "
              f"ctxnb {o['cpu']:.2f} MB/s CPU ({o['wall']:.2f} wall), "
              f"before #43 {b['cpu']:.2f} MB/s CPU ({b['wall']:.2f} wall), "
              f"ratio {o['cpu'] / b['cpu']:.2f} CPU "
              f"({o['wall'] / b['wall']:.2f} wall)")  # fmt: skip


#: The pass before false redactions in prose were fixed (main when that work began).
PROSE_BEFORE_REF = "01e1d2f"


class _Found:
    """A detector's findings given as (start, end) spans, for false_redactions."""

    def __init__(self, spans: list[list[int]]) -> None:
        self.findings = [type("F", (), {"start": a, "end": b})() for a, b in spans]


def prose(refs: tuple[str, ...]) -> None:
    """False redactions on real prose and code: ctxnb's README, docs, sources and two
    vendored JSON files, by paragraph (``tests/_prose_corpus.py``), each file redacted
    whole as ``read_file`` redacts it; the detectors at ``refs`` on the same files."""
    from _prose_corpus import false_redactions, prose_files, prose_pieces

    from ctxnb.redaction.redactor import redact

    files = prose_files()
    look, examples = prose_pieces(files)
    size = sum(len(t.encode("utf-8")) for t in files.values())
    print(f"real prose and code: {len(files)} files, {size / 1e6:.1f} MB, {len(look)} paragraphs "
          f"naming a secret word ({len(examples)} examples of a secret left out)")  # fmt: skip
    names = list(files)
    for ref in refs:
        spans = baseline(ref, [files[n] for n in names])["spans"]
        by_text = {id(files[n]): sp for n, sp in zip(names, spans, strict=True)}
        n, false = false_redactions(files, lambda t, by=by_text: _Found(by[id(t)]))
        print(f"  {ref:24s} false redactions {len(false)}/{n}")
    n, false = false_redactions(files, redact)
    print(f"  {'ctxnb':24s} false redactions {len(false)}/{n}")
    for piece, hit in false[:20]:
        print(f"      {piece.path}:{piece.line}: {hit[:3]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ds-mb", type=float, default=8.0, help="MB both tools scan for the ratio")
    ap.add_argument(
        "--only", choices=["43", "prose"], help="run only the #43 part or the prose part"
    )
    ap.add_argument("--exits", default=",".join(EXITS), help="comma-separated exits to drive")
    ap.add_argument("--baseline-ref", default=BASELINE_REF, help="the detector to compare")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    if args.only is None:
        accuracy()
        heldout()
        throughput(args.ds_mb)
    if args.only in (None, "prose"):
        prose((args.baseline_ref, PROSE_BEFORE_REF))
    if args.only in (None, "43"):
        generalisation(tuple(args.exits.split(",")), args.baseline_ref, stdlib_files())


if __name__ == "__main__":
    main()
