"""JSON-safety at the boundary: what is accepted, what is refused, and how it is copied."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from enum import IntEnum

import pytest

from mcp_tasks.domain.errors import NotJSONSafe
from mcp_tasks.domain.jsonsafe import (
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    JSONValue,
    dumps,
    ensure_json,
    ensure_object,
    loads,
)


def nest(levels: int) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


def test_accepts_every_json_type_and_returns_a_fresh_copy() -> None:
    """Scalars, lists and str-keyed dicts are accepted; the result shares nothing mutable."""
    original = {"a": [1, 2.5, "x", None, True], "b": {"c": []}}
    copied = ensure_json(original)
    assert copied == original
    assert isinstance(copied, dict)
    assert copied is not original
    assert copied["a"] is not original["a"]
    original["a"].append("later")  # type: ignore[attr-defined]
    assert copied["a"] == [1, 2.5, "x", None, True]


def test_tuples_become_lists_and_mappings_become_dicts() -> None:
    """Sequences and mappings normalise to the JSON shapes a store gives back."""
    assert ensure_json((1, (2, 3))) == [1, [2, 3]]
    copied = ensure_json(OrderedDict([("k", (1,))]))
    assert type(copied) is dict
    assert copied == {"k": [1]}


def test_bools_stay_bools_and_int_subclasses_become_ints() -> None:
    """True is not turned into 1; an IntEnum member is stored as its plain int value."""

    class Level(IntEnum):
        HIGH = 3

    assert ensure_json(True) is True
    value = ensure_json(Level.HIGH)
    assert type(value) is int
    assert value == 3


def test_64_bit_integer_limits() -> None:
    """Signed 64-bit integers are accepted; one beyond either end is refused."""
    assert ensure_json([INT_MIN, INT_MAX]) == [INT_MIN, INT_MAX]
    for too_big in (INT_MAX + 1, INT_MIN - 1, 10**30):
        with pytest.raises(NotJSONSafe):
            ensure_json({"n": too_big})


def test_only_finite_floats() -> None:
    """NaN and the infinities are refused; -0.0 and the extremes are fine."""
    for fine in (-0.0, 5e-324, 1.7976931348623157e308):
        assert ensure_json(fine) == fine
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(NotJSONSafe):
            ensure_json([bad])


def test_strings_must_be_valid_unicode() -> None:
    """Lone surrogates are refused in values and in keys; NUL and astral characters are fine."""
    assert ensure_json("nul\x00 and 🎉") == "nul\x00 and 🎉"
    for bad in ("\ud800", {"\udfff": 1}, ["ok", "\udc80"]):
        with pytest.raises(NotJSONSafe):
            ensure_json(bad)


def test_keys_must_be_strings() -> None:
    """Integer, None or tuple keys are refused rather than silently turned into strings."""
    for bad in ({1: "a"}, {None: "a"}, {("a",): 1}):
        with pytest.raises(NotJSONSafe):
            ensure_json(bad)


def test_non_json_types_are_refused() -> None:
    """Bytes, sets, dates and arbitrary objects are not JSON."""
    for bad in (b"x", {1, 2}, frozenset(), object(), 1j):
        with pytest.raises(NotJSONSafe):
            ensure_json({"v": bad})


def test_nesting_depth_is_bounded() -> None:
    """Up to MAX_DEPTH levels of nesting are accepted; one more is refused."""
    assert ensure_json(nest(MAX_DEPTH)) == nest(MAX_DEPTH)
    with pytest.raises(NotJSONSafe):
        ensure_json(nest(MAX_DEPTH + 1))


def test_ensure_object_wants_an_object() -> None:
    """ensure_object accepts a mapping only, and names the value's role in the message."""
    assert ensure_object({"a": 1}, "result") == {"a": 1}
    not_objects: tuple[object, ...] = ([], "text", 1, None)
    for bad in not_objects:
        with pytest.raises(NotJSONSafe, match="result must be a JSON object"):
            ensure_object(bad, "result")


def test_errors_are_type_errors_naming_what_was_checked() -> None:
    """NotJSONSafe is a TypeError and its message names the value's role, not its content."""
    with pytest.raises(TypeError, match=r"^status_message holds a set"):
        ensure_json({"secret"}, "status_message")


def test_dumps_is_compact_sorted_and_keeps_unicode() -> None:
    """dumps gives one canonical text (for fingerprints), and loads reads it back exactly."""
    value: JSONValue = {"b": [1, 2.5], "a": "é🎉", "c": {"z": None, "y": True}}
    text = dumps(value)
    assert text == '{"a":"é🎉","b":[1,2.5],"c":{"y":true,"z":null}}'
    assert dumps(loads(text)) == text
    assert loads(text.encode()) == value
    assert json.loads(text) == value
