r"""What an outside MCP server says, made fit for the model: its tools' names and
descriptions redacted and escaped, their argument schemas as pydantic models, its results
cut to a size a context can hold, and its errors redacted whole before they are cut.

An outside server is not trusted: a tool name or a description can carry a secret, or
terminal escapes and bidi overrides that redraw or reorder what a human reads in a tool
list. Everything it says passes :func:`shown` (the one redaction pass, then
:func:`~ctxnb._util.text.visible`) before it reaches ``tools/list``, a search, or an error.

Example:
    >>> out = cap_result({"text": "a" * 100_000, "is_error": False})
    >>> len(out["text"]) < MAX_RESULT_CHARS + 100, out["text"][:3]
    (True, 'aaa')
    >>> shown("look\x1b[2Kup")
    'look\\u001b[2Kup'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from .._util.text import visible
from ..errors import RegistryError
from ..redaction.redactor import redact_data, redact_text

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_RESULT_CHARS",
    "cap_result",
    "error_text",
    "schema_model",
    "shown",
]

# As much as ctxnb keeps of a command's output (ctxnb.sandbox's max_output_bytes).
MAX_RESULT_CHARS = 64_000
# As much of an outside error as a tool's error message carries.
MAX_ERROR_CHARS = 500


def shown(text: str) -> str:
    """``text`` from an outside server as the model and a human may see it: redacted,
    then with control, bidi and invisible characters shown as escapes."""
    return visible(redact_text(text))


def _shown_data(value: Any) -> Any:
    """:func:`shown` applied to every string (keys too) inside JSON-like data."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown(str(k)): _shown_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown_data(v) for v in value]
    return value


def error_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """An outside server's error message, :func:`shown` whole and only then cut to its
    first ``limit`` characters.

    Cut after redaction, never before: cut first, the part of a token left before the
    cut is too short for the redactor to recognise, and most of it stays readable.

    Example:
        >>> token = "gh" + "p_" + "Zx81Qw" * 6
        >>> out = error_text("x" * 490 + " " + token)
        >>> "Zx81" in out, out.endswith("characters of the error cut]")
        (False, True)
    """
    text = shown(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [… {len(text) - limit} characters of the error cut]"


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
    redacted and escaped (:func:`shown`: the model reads it).

    A schema the validator cannot use (not a JSON schema, a ``$ref`` that resolves
    nowhere) is the server's fault, not the caller's: such a call raises
    :class:`~ctxnb.errors.RegistryError`.
    """
    import jsonschema

    frozen = json.loads(json.dumps(dict(schema) or {"type": "object"}))
    frozen.setdefault("type", "object")
    listed = _shown_data(redact_data(frozen))
    validator = jsonschema.Draft202012Validator(frozen)

    class Args(BaseModel):
        model_config = ConfigDict(extra="allow", title=name)

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(listed))

        @model_validator(mode="after")
        def _valid(self) -> Args:
            data = dict(self.__pydantic_extra__ or {})
            try:
                errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.path])
            except Exception as e:  # the schema is untrusted input: any failure is its own
                raise RegistryError(
                    f"{name}: server {server!r} describes the arguments with an input schema "
                    f"that cannot be used ({type(e).__name__}: {error_text(str(e), 200)}); "
                    "the tool cannot be called until the server's schema is fixed"
                ) from None
            if errors:
                first = errors[0]
                where = ".".join(str(p) for p in first.path) or "(arguments)"
                raise ValueError(f"{where}: {first.message}")
            return self

    Args.__name__ = Args.__qualname__ = f"{name}_args"
    return Args
