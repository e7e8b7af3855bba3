"""Does keep-all track the prompt Claude Code sent? Per session, in each replay mode.

For each Claude Code session given, replays it under ``KeepAll`` and prints the median
of ``ctxnb tokens / recorded prompt tokens`` over the calls that record usage (and per
compaction segment), in four modes: files in the pool (tool outputs only, what Claude
Code's prompt holds) or active (each file also shown as an object), with and without
the hidden prompt (Claude Code's instructions and tool definitions, which the
transcript does not hold; ``"auto"`` estimates their size at the first call with
usage, and every later call is then a prediction). Target: within ±20% of 1.

Usage: ``python bench/fidelity_claude_code.py [--tokens NAME] [SESSION.jsonl ...]``
(``--tokens``: the token counter, such as ``tiktoken:cl100k_base``; default ctxnb's
heuristic, calibrated on Gemini, which counts OpenAI's prompts high; default session: the
vendored session ``tests/data/trajectories/claude-code/258c7280-….jsonl``). Sessions
not used to develop the replay are a fair test of it; a source checkout's test data
holds one, other real transcripts can be passed by path. Any run ``load()`` reads can be
passed the same way, a Codex CLI rollout included (its recorded prompt is each
``token_count``'s ``input_tokens``).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT = [
    REPO
    / "tests"
    / "data"
    / "trajectories"
    / "claude-code"
    / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
]


def main(argv: list[str]) -> int:
    from ctxnb.replay import load
    from ctxnb.replay.fidelity import FidelityWarning, fidelity_from_frame
    from ctxnb.replay.runner import HiddenPrompt, replay
    from ctxnb.strategies.builtin import KeepAll

    counter: str | None = None
    if argv[:1] == ["--tokens"]:
        if len(argv) < 2:
            print("--tokens needs a counter name, such as tiktoken:cl100k_base", file=sys.stderr)
            return 2
        counter, argv = argv[1], argv[2:]
    paths = [Path(a) for a in argv] or DEFAULT
    print(f"token counter: {counter or 'heuristic (default)'}")
    print(f"{'session':10s} {'files':6s} {'hidden':6s} {'calls':>5s} {'median':>7s}  segments")
    for path in paths:
        run = load(path)
        for files in ("pool", "active"):
            hidden: HiddenPrompt
            for hidden in ("auto", None):
                df = replay(
                    run,
                    [KeepAll()],
                    files=files,
                    hidden_prompt_tokens=hidden,
                    token_counter=counter,
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FidelityWarning)  # shown in the line
                    r = fidelity_from_frame(df)
                segs = " ".join(f"{m:.3f}" for m in r.segments["median_ratio"])
                flag = "" if 0.8 <= r.median_ratio_raw <= 1.2 else "  OUTSIDE ±20%"
                print(
                    f"{run.id[:8]:10s} {files:6s} {hidden or '-':6s} {r.steps:5d} "
                    f"{r.median_ratio_raw:7.3f}  [{segs}]{flag}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
