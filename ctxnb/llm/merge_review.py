"""A review backend for merge proposals: any litellm model resolves the conflicts.

:func:`ctxnb.tools.merging.review_request` shapes what is sent (the conflicts alone,
each with three lines around it, redacted); this module sends it as one chat request
and hands the answer back as JSON for :func:`ctxnb.tools.merging.check_resolutions`
to check. Nothing the model says is trusted here: an answer that is not JSON is
handed on as text, and refused there.

Example:
    >>> r = LiteLLMMergeReviewer("openai/gpt-5-mini", api_base="http://127.0.0.1:9/v1")
    >>> r.name, r.calls
    ('openai/gpt-5-mini', 0)
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..redaction.redactor import redact_data
from .calls import CallUsage, call_usage, litellm_module
from .prices import resolve_prices

__all__ = ["LiteLLMMergeReviewer"]

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```\s*$", re.S)


class LiteLLMMergeReviewer:
    """Resolves a merge proposal's conflicts with a model through litellm.

    Args:
        model: any litellm model name.
        api_base: an OpenAI-compatible endpoint, when not the provider's own.
        api_key: the key, when not in the provider's environment variable.
        prices: the price table its calls are billed with.
        **completion_kwargs: passed on to ``litellm.completion``.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        prices: Any = None,
        **completion_kwargs: Any,
    ) -> None:
        self.name = model
        self.api_base = api_base
        self.api_key = api_key
        self.prices = resolve_prices(prices)
        self.completion_kwargs = completion_kwargs
        self.calls = 0
        self.usage: list[CallUsage] = []

    def review(self, request: dict[str, Any]) -> Any:
        """The model's answer to ``request``: its JSON, or its text when it is not JSON."""
        # Shaped and redacted by the caller; redacted again at this exit all the same.
        sent: dict[str, Any] = redact_data(dict(request))
        instructions = str(sent.pop("instructions", ""))
        litellm = litellm_module()
        response = litellm.completion(
            model=self.name,
            messages=[
                {"role": "system", "content": instructions},
                {"role": "user", "content": json.dumps(sent, ensure_ascii=False, indent=1)},
            ],
            api_base=self.api_base,
            api_key=self.api_key,
            **self.completion_kwargs,
        )
        self.calls += 1
        self.usage.append(call_usage(response.usage, self.name, self.prices))
        text = str(response.choices[0].message.content or "").strip()
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
        try:
            return json.loads(text)
        except ValueError:
            return text

    def __repr__(self) -> str:
        return f"LiteLLMMergeReviewer({self.name!r})"
