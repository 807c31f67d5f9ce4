"""S-JSON: what goes in comes out exactly; what is not JSON never gets in."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_tasks import (
    Complete,
    Fail,
    InvalidInputRequests,
    NotJSONSafe,
    Progress,
    RequireInput,
    Store,
    TaskStatus,
    WorkSpec,
)
from mcp_tasks.domain.jsonsafe import INT_MAX, INT_MIN, JSONObject, JSONValue
from mcp_tasks_contract.suite.base import ContractBase, assert_unchanged, current, new_task

if TYPE_CHECKING:
    from mcp_tasks_contract.handles import StoreHandles

BOUNDARY_INTS: Final = (
    INT_MIN,
    INT_MIN + 1,
    -(2**53) - 1,
    -1,
    0,
    1,
    2**53 + 1,
    INT_MAX - 1,
    INT_MAX,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(INT_MIN, INT_MAX)
    | st.sampled_from(BOUNDARY_INTS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)

# Values that are not JSON-safe, each also buried inside otherwise fine JSON.
NOT_JSON: Final[tuple[object, ...]] = (
    float("nan"),
    float("inf"),
    -float("inf"),
    INT_MAX + 1,
    INT_MIN - 1,
    "\ud800",
    {1: "non-string key"},
    {"\udfff": "lone surrogate key"},
    b"bytes",
    {1, 2},
    object(),
    {"deep": [1, {"x": float("nan")}]},
)


ROOTS: Final[JSONObject] = {"method": "roots/list"}

# Something that is not JSON, somewhere inside otherwise fine JSON.
bad_leaves = st.sampled_from(
    [math.nan, math.inf, INT_MAX + 1, INT_MIN - 1, "\ud800", {1: "x"}, {"\udc00": 1}, b"", set()]
)
not_json = st.recursive(
    bad_leaves,
    lambda inner: (
        st.tuples(st.lists(json_values, max_size=2), inner, st.lists(json_values, max_size=2)).map(
            lambda parts: [*parts[0], parts[1], *parts[2]]
        )
        | st.tuples(
            st.dictionaries(st.text(max_size=4), json_values, max_size=2),
            st.text(max_size=4),
            inner,
        ).map(lambda parts: {**parts[0], parts[1]: parts[2]})
    ),
    max_leaves=4,
)


def same_json(left: object, right: object) -> bool:
    """Equal as JSON, types included: 1, 1.0 and True are three different values, and floats
    compare bit for bit (-0.0 is not 0.0; ``==`` would say it is)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        assert isinstance(right, float)
        return left.hex() == right.hex()
    if isinstance(left, dict):
        assert isinstance(right, dict)
        return left.keys() == right.keys() and all(same_json(left[k], right[k]) for k in left)
    if isinstance(left, list):
        assert isinstance(right, list)
        return len(left) == len(right) and all(map(same_json, left, right))
    return left == right


async def round_trip(writer: Store, reader: Store, value: JSONValue) -> None:
    """``value`` through request params, a response, a result, an error's data and a
    work descriptor's input; a string ``value`` also as a status message."""
    request: JSONObject = {"method": "elicitation/create", "params": {"value": value}}
    asking = await new_task(writer, owner="alice")
    await writer.put_status(asking.task_id, RequireInput({"q": request, "r": request}))
    seen = await reader.get(asking.task_id, "alice")
    assert same_json(dict(seen.input_requests), {"q": request, "r": request})
    await writer.update(asking.task_id, "alice", {"q": value})
    seen = await reader.get(asking.task_id, "alice")
    assert same_json(seen.input_responses["q"], value)
    await writer.put_status(asking.task_id, Complete({"value": value}))
    seen = await reader.get(asking.task_id, "alice")
    assert seen.status is TaskStatus.COMPLETED
    assert same_json(seen.result, {"value": value})
    message = value if isinstance(value, str) else None
    failing = await new_task(writer, work=WorkSpec("job", value), status_message=message)
    seen = await current(reader, failing.task_id)
    assert seen.work is not None
    assert same_json(seen.work.input, value)
    assert seen.status_message == message
    error: JSONObject = {"code": -32000, "message": "failed", "data": value}
    await writer.put_status(failing.task_id, Fail(error))
    seen = await current(reader, failing.task_id)
    assert same_json(seen.error, error)


def nested(depth: int) -> JSONValue:
    value: JSONValue = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


class JSONContract(ContractBase):
    """S-JSON."""

    @pytest.mark.rule("S-JSON")
    # Sharing the function-scoped `handles` between examples is intended: each example
    # writes brand-new tasks, and closes the handles it opened so none pile up.
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(value=json_values)
    async def test_any_json_value_round_trips_exactly(
        self, handles: StoreHandles, value: JSONValue
    ) -> None:
        """Generated JSON (unicode, nesting, 64-bit ints, floats) reads back exactly elsewhere."""
        writer, reader = await handles.open_many(2)
        try:
            await round_trip(writer, reader, value)
        finally:
            await writer.close()
            await reader.close()

    @pytest.mark.rule("S-JSON", "INV-NOPARTIAL")
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(bad=not_json)
    async def test_anything_not_json_anywhere_is_refused(
        self, handles: StoreHandles, bad: object
    ) -> None:
        """A value with a non-JSON leaf at any depth is refused as a result, an error's data
        and a response (NotJSONSafe), and as request params (InvalidInputRequests); no write."""
        store = await handles.open()
        try:
            record = await new_task(store, owner="alice")
            asked = await store.put_status(record.task_id, RequireInput({"q": ROOTS}))
            value = cast("JSONValue", bad)
            with pytest.raises(NotJSONSafe):
                Complete({"value": value})
            with pytest.raises(NotJSONSafe):
                Fail({"code": 1, "message": "m", "data": value})
            with pytest.raises(InvalidInputRequests):
                RequireInput({"k": {"method": "elicitation/create", "params": {"v": value}}})
            with pytest.raises(NotJSONSafe):
                await store.update(record.task_id, "alice", {"q": value})
            await assert_unchanged(store, asked.record)
        finally:
            await store.close()

    @pytest.mark.rule("S-JSON")
    async def test_boundary_values_round_trip_exactly(self, handles: StoreHandles) -> None:
        """The 64-bit integer limits, extreme floats, NUL and astral characters, and deep
        nesting all come back exactly."""
        writer, reader = await handles.open_many(2)
        values: list[JSONValue] = [
            list(BOUNDARY_INTS),
            [0.1, -0.0, 1.0, 1e16, 1.5e300, -2.5e-300, 5e-324, 1.7976931348623157e308],
            ["", "\x00", "nul\x00inside", "é ü ß 中文 🎉 \U0010ffff", "\u2028\u2029", '"\\/'],
            {"\x00": 0, "🎉": [True, False, None], "": {"": ""}},
            nested(50),
            {"big": INT_MAX, "small": INT_MIN, "float": math.pi, "list": [[], {}, [[]]]},
        ]
        for value in values:
            await round_trip(writer, reader, value)

    @pytest.mark.rule("S-JSON", "INV-NOPARTIAL")
    async def test_values_that_are_not_json_are_refused(self, handles: StoreHandles) -> None:
        """NaN, infinities, integers beyond 64 bits, non-string keys, lone surrogates and
        non-JSON types are rejected at the boundary, and nothing is written."""
        store = await handles.open()
        record = await new_task(store, owner="alice")
        asked = await store.put_status(record.task_id, RequireInput({"q": ROOTS}))
        for not_json in NOT_JSON:
            bad = cast("JSONValue", not_json)  # deliberately not JSON: the boundary must refuse it
            with pytest.raises(NotJSONSafe):
                Complete({"value": bad})
            with pytest.raises(NotJSONSafe):
                Fail({"code": 1, "message": "m", "data": bad})
            with pytest.raises(InvalidInputRequests):
                RequireInput({"k": {"method": "elicitation/create", "params": {"v": bad}}})
            with pytest.raises(NotJSONSafe):
                await store.update(record.task_id, "alice", {"q": bad})
            await assert_unchanged(store, asked.record)
        with pytest.raises(NotJSONSafe):
            Progress("\ud800")
