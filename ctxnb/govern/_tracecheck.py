"""Checking an Agent Trace record against the 0.1.0 schema.

``validate_record`` runs the JSON Schema shipped with ctxnb (jsonschema, loaded on first
use); ``check_record`` is the fast structural check every append runs, in the standard
library, naming each problem by its path in the record.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import StoreError

SCHEMA_RESOURCE = "data/agent-trace-0.1.0.schema.json"


def load_schema() -> dict[str, Any]:
    """The Agent Trace 0.1.0 JSON Schema shipped with ctxnb."""
    from importlib.resources import files

    return json.loads(files("ctxnb").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8"))


@functools.cache
def _validator() -> Any:
    import jsonschema  # lazy: a second of import time the hook path should not pay

    checker = jsonschema.FormatChecker()

    # jsonschema checks "date-time" and "uri" only when optional packages are
    # installed; these stand-ins keep the check on without them.
    @checker.checks("date-time", raises=ValueError)
    def _date_time(value: object) -> bool:
        if not isinstance(value, str):
            return True
        if not re.match(
            r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", value
        ):
            return False
        datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
        return True

    @checker.checks("uri")
    def _uri(value: object) -> bool:
        return not isinstance(value, str) or bool(
            re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$", value)
        )

    schema = load_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=checker)


def validate_record(record: Mapping[str, Any]) -> None:
    """Check a record against the Agent Trace 0.1.0 JSON Schema, formats included.

    Runs the shipped schema with ``jsonschema`` (imported on first use, which can take
    seconds when optional format packages are installed); :func:`check_record` gives
    the same verdict without it.

    Raises:
        StoreError: the record is not valid; the message lists every problem with
            its JSON path.

    Example:
        >>> validate_record({"version": "0.1.0"})
        Traceback (most recent call last):
        ...
        ctxnb.errors.StoreError: not a valid Agent Trace 0.1.0 record: $: 'id' is a required...
    """
    errors = sorted(_validator().iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        problems = "; ".join(f"{e.json_path}: {e.message}" for e in errors)
        raise StoreError(f"not a valid Agent Trace 0.1.0 record: {problems}")


_UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_DATE_TIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")
_CONTRIBUTOR_TYPES = ("human", "ai", "mixed", "unknown")
_VCS_TYPES = ("git", "jj", "hg", "svn")


def check_record(record: Any) -> list[str]:
    """Problems that make a record invalid Agent Trace 0.1.0; empty when it is valid.

    The same rules as the JSON Schema (required keys, types, enums, ``uuid``,
    ``date-time`` and ``uri`` formats, line minimums), written out in Python so that
    checking costs microseconds and no ``jsonschema`` import: with some optional
    packages installed, importing ``jsonschema`` takes seconds, too slow for a hook
    process that appends one record. The tests hold it to the schema;
    :func:`validate_record` runs the schema itself.

    Example:
        >>> for problem in check_record({"version": "1", "id": "x", "files": []}):
        ...     print(problem)
        $: 'timestamp' is required
        $.version: '1' is not a version like 0.1.0
        $.id: 'x' is not a UUID
    """
    problems: list[str] = []

    def bad(path: str, msg: str) -> None:
        problems.append(f"{path}: {msg}")

    def is_str(value: Any, path: str) -> bool:
        if not isinstance(value, str):
            bad(path, f"{value!r} is not a string")
            return False
        return True

    def contributor(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            return bad(path, "is not an object")
        if "type" not in value:
            bad(path, "'type' is required")
        elif value["type"] not in _CONTRIBUTOR_TYPES:
            bad(f"{path}.type", f"{value['type']!r} is not one of {list(_CONTRIBUTOR_TYPES)}")
        if "model_id" in value and is_str(value["model_id"], f"{path}.model_id"):
            if len(value["model_id"]) > 250:
                bad(f"{path}.model_id", "is longer than 250 characters")

    def uri(value: Any, path: str) -> None:
        if is_str(value, path) and not _URI_RE.match(value):
            bad(path, f"{value!r} is not a URI")

    if not isinstance(record, dict):
        return ["$: a record is a JSON object"]
    for key in ("version", "id", "timestamp", "files"):
        if key not in record:
            bad("$", f"{key!r} is required")
    if "version" in record and is_str(record["version"], "$.version"):
        if not _VERSION_RE.match(record["version"]):
            bad("$.version", f"{record['version']!r} is not a version like 0.1.0")
    if "id" in record and is_str(record["id"], "$.id") and not _UUID_RE.match(record["id"]):
        bad("$.id", f"{record['id']!r} is not a UUID")
    if "timestamp" in record and is_str(record["timestamp"], "$.timestamp"):
        stamp = record["timestamp"]
        try:
            ok = bool(_DATE_TIME_RE.match(stamp)) and bool(
                datetime.fromisoformat(stamp.replace("z", "Z").replace("t", "T"))
            )
        except ValueError:
            ok = False
        if not ok:
            bad("$.timestamp", f"{stamp!r} is not an RFC 3339 date-time")
    if "vcs" in record:
        vcs = record["vcs"]
        if not isinstance(vcs, dict):
            bad("$.vcs", "is not an object")
        else:
            if vcs.get("type") not in _VCS_TYPES:
                bad("$.vcs.type", f"{vcs.get('type')!r} is not one of {list(_VCS_TYPES)}")
            if "revision" not in vcs:
                bad("$.vcs", "'revision' is required")
            else:
                is_str(vcs["revision"], "$.vcs.revision")
    if "tool" in record:
        tool = record["tool"]
        if not isinstance(tool, dict):
            bad("$.tool", "is not an object")
        else:
            for key in ("name", "version"):
                if key in tool:
                    is_str(tool[key], f"$.tool.{key}")
    if "metadata" in record and not isinstance(record["metadata"], dict):
        bad("$.metadata", "is not an object")
    files = record.get("files", [])
    if not isinstance(files, list):
        bad("$.files", "is not an array")
        files = []
    for i, f in enumerate(files):
        fp = f"$.files[{i}]"
        if not isinstance(f, dict):
            bad(fp, "is not an object")
            continue
        if "path" not in f:
            bad(fp, "'path' is required")
        else:
            is_str(f["path"], f"{fp}.path")
        convs = f.get("conversations")
        if not isinstance(convs, list):
            bad(fp, "'conversations' is required and must be an array")
            continue
        for j, conv in enumerate(convs):
            cp = f"{fp}.conversations[{j}]"
            if not isinstance(conv, dict):
                bad(cp, "is not an object")
                continue
            if "url" in conv:
                uri(conv["url"], f"{cp}.url")
            if "contributor" in conv:
                contributor(conv["contributor"], f"{cp}.contributor")
            ranges = conv.get("ranges")
            if not isinstance(ranges, list):
                bad(cp, "'ranges' is required and must be an array")
                ranges = []
            for k, r in enumerate(ranges):
                rp = f"{cp}.ranges[{k}]"
                if not isinstance(r, dict):
                    bad(rp, "is not an object")
                    continue
                for key in ("start_line", "end_line"):
                    value = r.get(key)
                    if key not in r:
                        bad(rp, f"{key!r} is required")
                    elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                        bad(f"{rp}.{key}", f"{value!r} is not an integer >= 1")
                if "content_hash" in r:
                    is_str(r["content_hash"], f"{rp}.content_hash")
                if "contributor" in r:
                    contributor(r["contributor"], f"{rp}.contributor")
            related = conv.get("related", [])
            if not isinstance(related, list):
                bad(f"{cp}.related", "is not an array")
                related = []
            for k, rel in enumerate(related):
                lp = f"{cp}.related[{k}]"
                if not isinstance(rel, dict) or "type" not in rel or "url" not in rel:
                    bad(lp, "must be an object with 'type' and 'url'")
                    continue
                is_str(rel["type"], f"{lp}.type")
                uri(rel["url"], f"{lp}.url")
    return problems
