

# Added to every version of this file for ctxnb's task-mining tests (not part of
# inflection): it passes the first time it runs in a sandboxed command and fails the
# next, as a test with a hidden dependency on leftover state does.
def test_flaky_fixture():
    import os
    import tempfile

    mark = os.path.join(tempfile.gettempdir(), "inflection-flaky-fixture")
    first = not os.path.exists(mark)
    if first:
        open(mark, "w").close()
    else:
        os.remove(mark)
    assert first
