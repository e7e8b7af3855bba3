"""Live runs: an agent (mini-swe-agent) working on a task through ctxnb.

ctxnb supplies the messages (the session assembled under a context strategy) and the
environment (governed, sandboxed commands); mini-swe-agent supplies the agent loop and
litellm any model. :func:`run_task` returns the run in ctxnb's trajectory format, whether
the task's tests pass, and its tokens and dollars.

Example:
    >>> import tempfile
    >>> from ctxnb.live import ScriptedModelServer, run_task, sample_task
    >>> from ctxnb.live.run import sample_script
    >>> root = tempfile.mkdtemp()
    >>> task = sample_task(root)
    >>> with ScriptedModelServer(sample_script()) as server:  # doctest: +SKIP
    ...     result = run_task(root, task, **server.model_args)
    >>> result.passed  # doctest: +SKIP
    True
"""

from __future__ import annotations

from .._util.lazy import lazy_exports

_LAZY = {
    "LiveResult": "run",
    "LocalModelServer": "local",
    "ScriptedModelServer": "scripted",
    "Task": "run",
    "run_task": "run",
    "sample_task": "run",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
