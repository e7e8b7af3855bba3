"""``make demo``: ctxnb end to end on the sample workspace.

Run with ``python -m ctxnb.demo``. It works on a temporary copy of the sample
workspace, so it can run any number of times.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from .samples import copy_sample_workspace
from .workspace import Workspace


def _h(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def run(base: Path) -> None:
    root = copy_sample_workspace(base)
    ws = Workspace.open(root)
    print(f"sample workspace: {root}")

    _h("1. index the workspace")
    report = ws.index(progress=False)
    print(report)

    _h("2. change a file, re-index")
    target = root / "inventory" / "models.py"
    text = target.read_text()
    target.write_text(text.replace("reorder_level: int = 5", "reorder_level: int = 10"))
    (root / "scripts" / "seed.sh").unlink()
    report = ws.index(progress=False)
    print(report)
    for rel, action in sorted(report.changed_paths.items()):
        print(f"  {action:<8} {rel}")

    _h("3. history of inventory/models.py")
    for v in ws.history("inventory/models.py"):
        d = v.doc
        print(
            f"  tx {v.tx_id:>3}  {v.tx_time:%H:%M:%S.%f}  "
            f"source {d['source_hash'][:12]}  {d['char_count']} chars"
        )
    ws.close()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ctxnb-demo-") as tmp:
        run(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
