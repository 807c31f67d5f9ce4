"""JSON-safety checks at the boundary: what a Store keeps must round-trip on every backend."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any, TypeAlias, cast

from mcp_tasks.domain.errors import NotJSONSafe

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"

# Every backend must keep integers exactly; signed 64-bit is what all of them (BSON included) can.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
MAX_DEPTH = 64


def ensure_json(value: object, what: str = "value") -> JSONValue:
    """Return ``value`` as a fresh JSON-safe copy, or raise :class:`NotJSONSafe`.

    JSON-safe: ``None``, ``bool``, 64-bit ``int``, finite ``float``, ``str`` that encodes as
    UTF-8, ``list``/``tuple`` of JSON-safe values, and ``dict`` with ``str`` keys.
    """
    return _copy(value, what, 0)


def ensure_object(value: object, what: str = "value") -> JSONObject:
    """Like :func:`ensure_json`, and the value must be a JSON object."""
    if not isinstance(value, Mapping):
        raise NotJSONSafe(f"{what} must be a JSON object")
    return cast("JSONObject", _copy(value, what, 0))


def _copy(value: object, what: str, depth: int) -> JSONValue:
    if depth > MAX_DEPTH:
        raise NotJSONSafe(f"{what} nests deeper than {MAX_DEPTH} levels")
    # The exact JSON types first, as json.loads makes them: this runs on every write, and
    # the isinstance checks below (an ABC among them) cost more than the copy itself.
    if type(value) is str:
        _check_text(value, what)
        return value
    if type(value) is dict:
        out: dict[str, JSONValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJSONSafe(f"{what} has a non-string object key")
            _check_text(key, what)
            out[str(key)] = _copy(item, what, depth + 1)
        return out
    if type(value) is list:
        return [_copy(item, what, depth + 1) for item in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise NotJSONSafe(f"{what} holds an integer outside the signed 64-bit range")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJSONSafe(f"{what} holds a non-finite float")
        return float(value)
    if isinstance(value, str):
        _check_text(value, what)
        return str(value)
    if isinstance(value, list | tuple):
        return [_copy(item, what, depth + 1) for item in value]
    if isinstance(value, Mapping):
        copied: dict[str, JSONValue] = {}
        for key, item in cast("Mapping[object, object]", value).items():
            if not isinstance(key, str):
                raise NotJSONSafe(f"{what} has a non-string object key")
            _check_text(key, what)
            copied[str(key)] = _copy(item, what, depth + 1)
        return copied
    raise NotJSONSafe(f"{what} holds a {type(value).__name__}, which is not JSON")


def _check_text(text: str, what: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotJSONSafe(f"{what} holds a string that is not valid Unicode") from None


def dumps(value: JSONValue) -> str:
    """Compact, deterministic JSON text (sorted keys) for storage and fingerprints."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def digest(value: JSONValue) -> str:
    """A short digest of a JSON value's :func:`dumps` text: equal values, equal digests."""
    return hashlib.sha256(dumps(value).encode()).hexdigest()[:32]


def loads(text: str | bytes) -> Any:
    """Parse JSON text written by :func:`dumps`."""
    return json.loads(text)
