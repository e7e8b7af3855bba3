"""Made this fixture: a session saved by ctxnb before the metadata log (commit 6fde2a4).

Run with that ctxnb first on the path: ``PYTHONPATH=<old checkout> python make.py``.
It writes /tmp/ctxnb-legacy/ws (a workspace mounted as /workspace on the filesystem
``legacy-fixture`` whose .ctxnb/store is vendored here as
ws/dot-ctxnb/store) and /tmp/ctxnb-legacy/expected.json: what that version showed at
turns 1 and 2 (hash, text, OpenAI and Anthropic transcripts).
"""

import json
import pathlib

from ctxnb import MountMapping, Workspace
from ctxnb.strategies.builtin import KeepAll, RecencyWindow

root = pathlib.Path("/tmp/ctxnb-legacy/ws")
root.mkdir(parents=True)
(root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
(root / "notes.md").write_text("# notes\n")
# Behind a mount, so that paths show as /workspace/... wherever the store is copied.
ws = Workspace.open(root, mounts=[MountMapping("/workspace", str(root), "legacy-fixture")])
s = ws.session("legacy", system_prompt="You fix bugs.", rules=False)
s.add_turn("user", "Fix add() in calc.py.")
s.add_path("calc.py")
s.add_path("notes.md", activate=False)
s.record_toolcall(
    "run_command", {"cmd": "python -m unittest -q"}, "F\nFAILED (failures=1)\n", status="fail"
)
c1 = s.assemble(KeepAll())
s.add_turn("assistant", "add() subtracts; fixing it.")
(root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
s.add_path("calc.py")
s.record_toolcall("run_command", {"cmd": "python -m unittest -q"}, ".\nOK\n")
c2 = s.assemble(RecencyWindow(2))
out = {
    str(c.turn): {
        "hash": c.hash,
        "text": c.to_text(),
        "openai": c.to_messages("openai"),
        "anthropic": c.to_messages("anthropic"),
    }
    for c in (c1, c2)
}
s.close()
(root.parent / "expected.json").write_text(json.dumps(out, indent=1) + "\n")
