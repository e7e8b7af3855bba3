"""What a model reads of an MCP ``read_file`` result: tokens of the text content.

Before, ctxnb's server put the whole result as one JSON string in the text content
(every newline and quote of the file escaped, every key repeated); now the text is the
file under a one-line header and the JSON goes to ``structuredContent`` only. Both are
rendered from the same result of ctxnb's MCP backend for every text file of the sample
workspace, and counted with the default token counter and, when installed, tiktoken's
cl100k_base. The baseline is the file's own text (what no wrapper at all would cost).

Run with::

    python bench/mcp_text.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from ctxnb.integrations.mcp_server import McpBackend  # noqa: E402
from ctxnb.llm.tokens import resolve_token_counter  # noqa: E402
from ctxnb.samples import copy_sample_workspace  # noqa: E402


def main() -> None:
    root = copy_sample_workspace(tempfile.mkdtemp(), name="bench")
    counters = {"default": resolve_token_counter(None)}
    try:
        counters["cl100k"] = resolve_token_counter("tiktoken:cl100k_base")
    except Exception:  # noqa: BLE001 - tiktoken is optional here
        pass
    totals = {name: {"file": 0, "json": 0, "text": 0} for name in counters}
    chars = {"file": 0, "json": 0, "text": 0}
    n = 0
    with McpBackend(root) as backend:
        for path in sorted(p for p in root.rglob("*.py") if ".ctxnb" not in p.parts):
            rel = path.relative_to(root).as_posix()
            res = backend.call_tool("read_file", {"path": rel})
            result = res.structured_content["result"]
            rendered = {
                "file": result["content"],
                "json": json.dumps(result, ensure_ascii=False, default=str),
                "text": res.content[0].text,
            }
            for k, v in rendered.items():
                chars[k] += len(v)
            for name, counter in counters.items():
                for k, v in rendered.items():
                    totals[name][k] += counter.count(v)
            n += 1
    print(f"read_file of {n} Python files of the sample workspace (sums):")
    print(
        f"  characters: file {chars['file']:,}  JSON text {chars['json']:,} "
        f"(+{chars['json'] / chars['file'] - 1:.0%})  model text {chars['text']:,} "
        f"(+{chars['text'] / chars['file'] - 1:.0%})"
    )
    for name, t in totals.items():
        print(
            f"  tokens ({name}): file {t['file']:,}  JSON text {t['json']:,} "
            f"(+{t['json'] / t['file'] - 1:.0%})  model text {t['text']:,} "
            f"(+{t['text'] / t['file'] - 1:.0%}); per read {t['json'] / n:.0f} -> "
            f"{t['text'] / n:.0f}"
        )


if __name__ == "__main__":
    main()
