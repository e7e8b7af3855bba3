"""What an outside MCP server says, made fit for the model: its tools' argument schemas
as pydantic models, and its results cut to a size a context can hold.

Example:
    >>> out = cap_result({"text": "a" * 100_000, "is_error": False})
    >>> len(out["text"]) < MAX_RESULT_CHARS + 100, out["text"][:3]
    (True, 'aaa')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from ..errors import RegistryError
from ..redaction.redactor import redact_data, redact_text

__all__ = ["MAX_RESULT_CHARS", "cap_result", "schema_model"]

# As much as ctxnb keeps of a command's output (ctxnb.sandbox's max_output_bytes).
MAX_RESULT_CHARS = 64_000


def cap_result(out: dict[str, Any], limit: int = MAX_RESULT_CHARS) -> dict[str, Any]:
    """``out`` (an outside tool's redacted result) with its text cut to its first and last
    ``limit // 2`` characters and structured content longer than ``limit`` left out.

    Cut after redaction, never before: a secret cut in half is no longer recognised.
    """
    text = out.get("text")
    if isinstance(text, str) and len(text) > limit:
        half = limit // 2
        cut = len(text) - 2 * half
        out["text"] = f"{text[:half]}\n[… {cut} characters of the result cut …]\n{text[-half:]}"
    if "structured" in out:
        size = len(json.dumps(out["structured"], default=str))
        if size > limit:
            del out["structured"]
            out["structured_cut"] = f"{size} characters of structured content left out"
    return out


def schema_model(name: str, schema: Mapping[str, Any], *, server: str) -> type[BaseModel]:
    """A pydantic model that validates with the tool's own JSON schema and reports it
    (redacted: the model reads it).

    A schema the validator cannot use (not a JSON schema, a ``$ref`` that resolves
    nowhere) is the server's fault, not the caller's: such a call raises
    :class:`~ctxnb.errors.RegistryError`.
    """
    import jsonschema

    frozen = json.loads(json.dumps(dict(schema) or {"type": "object"}))
    frozen.setdefault("type", "object")
    shown = redact_data(frozen)
    validator = jsonschema.Draft202012Validator(frozen)

    class Args(BaseModel):
        model_config = ConfigDict(extra="allow", title=name)

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(shown))

        @model_validator(mode="after")
        def _valid(self) -> Args:
            data = dict(self.__pydantic_extra__ or {})
            try:
                errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.path])
            except Exception as e:  # the schema is untrusted input: any failure is its own
                raise RegistryError(
                    f"{name}: server {server!r} describes the arguments with an input schema "
                    f"that cannot be used ({type(e).__name__}: {redact_text(str(e)[:200])}); "
                    "the tool cannot be called until the server's schema is fixed"
                ) from None
            if errors:
                first = errors[0]
                where = ".".join(str(p) for p in first.path) or "(arguments)"
                raise ValueError(f"{where}: {first.message}")
            return self

    Args.__name__ = Args.__qualname__ = f"{name}_args"
    return Args
