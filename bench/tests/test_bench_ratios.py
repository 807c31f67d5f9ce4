"""The performance suite's verdicts (bench/run.py): how figures of one run become the goals of
``ratios``. The speed itself is measured by ``nox -s bench``, never asserted here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench import run, served

if TYPE_CHECKING:
    from pathlib import Path


def figures() -> dict[str, Any]:
    """A run on memory and SQLite only, MongoDB missing, the peer on memory and Redis."""
    return {
        "poll_capacity": {
            "memory": {"requests_per_s": 3000.0, "cpu_us_per_request": 200.0},
            "sqlite": {"requests_per_s": 1500.0, "cpu_us_per_request": 250.0},
            "fastmcp-tasks": {"requests_per_s": 1000.0},
            "bare starlette": {"requests_per_s": 6000.0},
        },
        "cpu_per_task": {
            "memory": {
                "cpu_ms_per_task": 2.0,
                "requests_per_task": {"tasks/get": 4.0, "tools/call": 1.0},
                "create_p50_ms": 10.0,
                "create_p99_ms": 40.0,
                "later_create_p50_ms": 8.0,
                "later_create_p99_ms": 20.0,
            },
            "sqlite": {
                "cpu_ms_per_task": 3.0,
                "requests_per_task": {"tasks/get": 5.0, "tools/call": 1.0},
            },
            "fastmcp-tasks": {
                "cpu_ms_per_task": 10.0,
                "requests_per_task": {"tasks/get": 4.5, "tools/call": 1.0},
            },
            "fastmcp-tasks redis": {
                "cpu_ms_per_task": 7.0,
                "requests_per_task": {"tasks/get": 4.0, "tools/call": 1.0},
            },
            "sdk tools/call": {"cpu_ms_per_task": 0.9, "requests_per_task": {"tools/call": 1.0}},
        },
        "tools_call": {
            "memory": {"server_cpu_us_per_request": 1100.0},
            "memory create only": {"server_cpu_us_per_request": 800.0},
            "sdk tools/call": {"server_cpu_us_per_request": 1000.0},
        },
        "store_ops": {
            "memory": {"store.get": 1e6, "store.put_status": 1e5},
            "sqlite": {
                "store.get": 700.0,
                "raw read": 1000.0,
                "store.put_status": 400.0,
                "raw update": 1000.0,
            },
        },
        "scale": {
            "sqlite": {
                "small": {"get_us": 100.0, "put_status_us": 100.0, "create_us": 100.0},
                "large": {"get_us": 130.0, "put_status_us": 131.0, "create_us": 90.0},
            }
        },
        "near_cap": {"sqlite": {"far_creates_per_s": 100.0, "near_creates_per_s": 69.0}},
        "scale_ops": {
            "sqlite": {
                "small": {"create_us": 100.0, "stats_us": 1000.0, "counts_us": 50.0},
                "large": {"create_us": 130.0, "stats_us": 90000.0, "counts_us": 55.0},
            }
        },
    }


def test_each_goal_holds_the_ratio_its_goal_and_the_verdict() -> None:
    """Ratios of two figures of the run, against the suite's goals, inclusive bounds."""
    table = run.ratios(figures(), {"mongodb": "not available: no mongodb:// store"})
    assert table["tasks_get.memory_vs_fastmcp_tasks"] == {
        "measured": 3.0,
        "goal": ">= 3",
        "met": True,
        "requests": [{"tasks/get": 1.0}, {"tasks/get": 1.0}],
    }
    assert table["tasks_get.memory_vs_bare_starlette"]["met"] is False  # 0.5 < 0.85
    assert table["tasks_get.sqlite_vs_fastmcp_tasks"]["measured"] == 1.5
    assert table["tasks_get.sqlite_vs_fastmcp_tasks"]["met"] is False
    assert table["cpu_per_task.memory_vs_fastmcp_tasks"]["measured"] == 0.2
    assert table["cpu_per_task.memory_vs_fastmcp_tasks"]["met"] is True  # <= 0.25
    assert table["cpu_per_task.memory_vs_fastmcp_tasks_redis"]["measured"] == 0.286
    assert table["cpu_per_task.memory_vs_fastmcp_tasks_redis"]["met"] is False
    assert table["tools_call.memory_task_vs_sdk_plain"]["measured"] == 1.1
    assert table["tools_call.memory_task_vs_sdk_plain"]["met"] is True  # <= 1.1
    assert table["tools_call.memory_create_vs_sdk_plain"]["measured"] == 0.8
    assert table["tools_call.memory_create_vs_sdk_plain"]["goal"] == "reported"
    assert table["create_p99_vs_p50.memory"]["met"] is False  # 4x > 3x
    assert table["store_ops.sqlite.get_vs_raw"]["met"] is True
    assert table["store_ops.sqlite.put_status_vs_raw"]["met"] is False
    assert table["scale.sqlite.get_latency_large_vs_small"]["met"] is True
    assert table["scale.sqlite.put_status_latency_large_vs_small"]["met"] is False
    assert table["cap.sqlite.near_vs_far_creates"]["met"] is False


def test_section_4c_holds_each_operation_large_over_small_to_its_goal() -> None:
    """Every operation of section 4c on a durable store, the large table's figure over the
    small one's, at most 1.3; an operation the store does not offer has no verdict; a
    missing store's say why."""
    table = run.ratios(figures(), {"mongodb": "not available: no mongodb:// store"})
    assert table["scale_ops.sqlite.create_large_vs_small"]["met"] is True  # 1.3
    assert table["scale_ops.sqlite.counts_large_vs_small"]["met"] is True
    assert table["scale_ops.sqlite.stats_large_vs_small"]["met"] is False  # 90x
    assert table["scale_ops.sqlite.renew_large_vs_small"]["met"] is None
    assert table["scale_ops.mongodb.get_large_vs_small"]["note"].startswith("not available")
    assert not any(key.startswith("scale_ops.memory.") for key in table)


def test_the_create_tail_after_the_first_wave_is_reported_beside_the_goal() -> None:
    """The goal counts every create; the creates after the first wave are a reading beside
    it, with no verdict of their own."""
    table = run.ratios(figures(), {"mongodb": "not available: no mongodb:// store"})
    assert table["create_p99_vs_p50.memory"]["measured"] == 4.0
    after = table["create_p99_vs_p50_after_first_wave.memory"]
    assert (after["measured"], after["goal"], after["met"]) == (2.5, "reported", None)
    assert "first wave" in after["note"]
    assert table["create_p99_vs_p50_after_first_wave.mongodb"]["note"].startswith("not available")


def test_goals_without_figures_are_reported_not_failed() -> None:
    """A missing backend's goals say why; a store with no raw driver says so; neither is a
    verdict."""
    table = run.ratios(figures(), {"mongodb": "not available: no mongodb:// store"})
    mongo = table["tasks_get.mongodb_vs_fastmcp_tasks"]
    assert mongo["measured"] is None
    assert mongo["met"] is None
    assert mongo["note"] == "not available: no mongodb:// store"
    memory = table["store_ops.memory.get_vs_raw"]
    assert (memory["met"], memory["note"]) == (None, "no raw driver to compare")


def test_the_profile_summary_counts_own_and_inclusive_samples(tmp_path: Path) -> None:
    """py-spy's collapsed stacks: a leaf's samples are its own; every frame of a stack
    counts the stack's samples once."""
    raw = tmp_path / "collapsed.txt"
    raw.write_text(
        "main (/x/site-packages/app/a.py:1);get (/x/site-packages/lib/b.py:2) 3\n"
        "main (/x/site-packages/app/a.py:1);put (/x/site-packages/app/c.py:3);"
        "get (/x/site-packages/lib/b.py:9) 1\n"
    )
    summary = served.summarise(raw)
    assert "4 samples" in summary
    packages, rest = summary.split("own, by function:")
    own, inclusive = rest.split("inclusive, by function:")
    assert "100.0%  lib" in packages
    assert "100.0%  get (lib/b.py)" in own
    assert "main" not in own
    assert "100.0%  get (lib/b.py)" in inclusive
    assert "100.0%  main (app/a.py)" in inclusive
    assert " 25.0%  put (app/c.py)" in inclusive


def test_a_figure_of_zero_is_never_a_met_goal() -> None:
    """A figure of 0 means nothing was measured (a server that answered nothing, a counter
    that never moved): its goal fails and says so, on a "<=" goal as on a ">=" one, and
    whether the 0 is above or below the ratio's line."""
    measured = figures()
    memory = measured["cpu_per_task"]["memory"]
    memory["cpu_ms_per_task"] = 0.0  # 0 / 10: a "<=" goal a 0 would meet
    memory["create_p50_ms"] = 0.0  # 40 / 0: no ratio at all
    measured["scale"]["sqlite"]["large"]["get_us"] = 0.0  # 0 / 100, "<="
    measured["near_cap"]["sqlite"]["near_creates_per_s"] = 0.0  # 0 / 100, ">="
    table = run.ratios(measured, {})
    for name in (
        "cpu_per_task.memory_vs_fastmcp_tasks",
        "create_p99_vs_p50.memory",
        "scale.sqlite.get_latency_large_vs_small",
        "cap.sqlite.near_vs_far_creates",
    ):
        entry = table[name]
        assert entry["met"] is False, name
        assert entry["measured"] is None, name
        assert "not measured" in entry["note"], name


def test_a_reading_of_zero_is_reported_as_not_measured() -> None:
    """A figure reported without a goal reads 0 as nothing measured too, not as a ratio."""
    measured = figures()
    measured["cpu_per_task"]["memory"]["later_create_p99_ms"] = 0.0
    after = run.ratios(measured, {})["create_p99_vs_p50_after_first_wave.memory"]
    assert (after["measured"], after["met"]) == (None, None)
    assert "not measured" in after["note"]


def test_the_verdict_is_judged_on_the_unrounded_ratio() -> None:
    """A ratio just past its goal misses it even when its three-decimal rounding lands on
    the goal; the table holds the rounded figure."""
    measured = figures()
    measured["cpu_per_task"]["memory"]["cpu_ms_per_task"] = 2.5004  # 0.25004 > 0.25
    measured["near_cap"]["sqlite"]["near_creates_per_s"] = 69.996  # 0.69996 < 0.7
    measured["poll_capacity"]["memory"]["requests_per_s"] = 2999.7  # 2.9997 < 3
    table = run.ratios(measured, {})
    entry = table["cpu_per_task.memory_vs_fastmcp_tasks"]
    assert (entry["measured"], entry["goal"], entry["met"]) == (0.25, "<= 0.25", False)
    assert table["cap.sqlite.near_vs_far_creates"]["measured"] == 0.7
    assert table["cap.sqlite.near_vs_far_creates"]["met"] is False
    assert table["tasks_get.memory_vs_fastmcp_tasks"]["measured"] == 3.0
    assert table["tasks_get.memory_vs_fastmcp_tasks"]["met"] is False


def test_the_tables_print_a_failed_measurement_with_its_reason() -> None:
    """goals.md and the printed table show a goal whose figure was 0 as missed, with why."""
    measured = figures()
    measured["cpu_per_task"]["memory"]["cpu_ms_per_task"] = 0.0
    table = run.ratios(measured, {})
    row = next(
        line
        for line in run.markdown_table(table).splitlines()
        if "cpu_per_task.memory_vs_fastmcp_tasks" in line
    )
    assert "**missed**" in row
    assert "not measured" in row


def test_the_floor_is_the_sdk_call_plus_our_polls_at_the_fast_path_cost() -> None:
    """The floor of a task on a store: the plain SDK ``tools/call`` of the tool, plus as
    many ``tasks/get`` as our server answered per task there, each at that store's
    ``tasks/get`` CPU (server + database) from section 1. Its goal is per store."""
    measured = figures()
    assert run.floor(measured, "memory") == (0.9 + 4 * 0.2, {"tools/call": 1.0, "tasks/get": 4.0})
    assert run.floor(measured, "sqlite") == (0.9 + 5 * 0.25, {"tools/call": 1.0, "tasks/get": 5.0})
    table = run.ratios(measured, {"mongodb": "not available: no mongodb:// store"})
    memory = table["cpu_per_task.memory_vs_floor"]
    assert (memory["measured"], memory["goal"], memory["met"]) == (1.176, "<= 1.2", True)
    sqlite = table["cpu_per_task.sqlite_vs_floor"]
    assert (sqlite["measured"], sqlite["goal"], sqlite["met"]) == (1.395, "<= 1.4", True)
    measured["cpu_per_task"]["sqlite"]["cpu_ms_per_task"] = 3.02  # 3.02 / 2.15 > 1.4
    assert run.ratios(measured, {})["cpu_per_task.sqlite_vs_floor"]["met"] is False
    assert table["cpu_per_task.postgres_vs_floor"]["met"] is None
    assert table["cpu_per_task.mongodb_vs_floor"]["note"] == "not available: no mongodb:// store"


def test_every_ratio_of_served_work_shows_the_requests_of_each_side() -> None:
    """Beside each CPU ratio, the requests each server answered per task, by method; beside
    the floor, the SDK call and the polls it prices; beside a capacity, one request each.
    The tables print them, so a ratio cannot hide a different amount of work."""
    table = run.ratios(figures(), {})
    assert table["cpu_per_task.memory_vs_fastmcp_tasks"]["requests"] == [
        {"tasks/get": 4.0, "tools/call": 1.0},
        {"tasks/get": 4.5, "tools/call": 1.0},
    ]
    assert table["cpu_per_task.memory_vs_floor"]["requests"] == [
        {"tasks/get": 4.0, "tools/call": 1.0},
        {"tools/call": 1.0, "tasks/get": 4.0},
    ]
    assert table["tasks_get.sqlite_vs_fastmcp_tasks"]["requests"] == [
        {"tasks/get": 1.0},
        {"tasks/get": 1.0},
    ]
    assert "requests" not in table["create_p99_vs_p50.memory"]
    row = next(
        line
        for line in run.markdown_table(table).splitlines()
        if "`cpu_per_task.memory_vs_fastmcp_tasks`" in line
    )
    assert "1 tools/call + 4 tasks/get \\| 1 tools/call + 4.5 tasks/get" in row


def test_the_peer_on_redis_is_reported_missing_without_redis() -> None:
    """With no Redis the peer runs on memory only: its Redis row says why, no verdict."""
    measured = figures()
    del measured["cpu_per_task"]["fastmcp-tasks redis"]
    table = run.ratios(measured, {"redis": "not available: set MCP_TASKS_TEST_REDIS_URL"})
    entry = table["cpu_per_task.memory_vs_fastmcp_tasks_redis"]
    assert (entry["measured"], entry["met"]) == (None, None)
    assert entry["note"] == "not available: set MCP_TASKS_TEST_REDIS_URL"


def test_the_production_stack_and_serve_rows_are_reported_with_how_each_was_served() -> None:
    """The capacity ratios on uvloop and httptools, and our server under `mcp-tasks serve`
    against uvicorn.run, are readings (no goal), each noting how both rows were served."""
    measured = figures()
    polls = measured["poll_capacity"]
    for name, rps, label in (
        ("memory uvloop", 6000.0, "uvicorn.run · uvloop loop · httptools"),
        ("bare starlette uvloop", 10000.0, "uvicorn.run · uvloop loop · httptools"),
        ("memory serve", 4500.0, "mcp-tasks serve · asyncio loop · httptools"),
    ):
        polls[name] = {"requests_per_s": rps, "served": label}
    polls["memory"]["served"] = "uvicorn.run · asyncio loop · h11"
    table = run.ratios(measured, {})
    production = table["tasks_get.memory_vs_bare_starlette_uvloop"]
    assert production["measured"] == 0.6
    assert (production["goal"], production["met"]) == ("reported", None)
    assert production["note"] == (
        "memory uvloop: uvicorn.run · uvloop loop · httptools;"
        " bare starlette uvloop: uvicorn.run · uvloop loop · httptools"
    )
    serve = table["tasks_get.memory_serve_vs_uvicorn_run"]
    assert serve["measured"] == 1.5
    assert "memory serve: mcp-tasks serve · asyncio loop · httptools" in serve["note"]
    assert "memory: uvicorn.run · asyncio loop · h11" in serve["note"]
    # The peer on uvloop was not measured in this run: no figure, no verdict.
    peer = table["tasks_get.memory_vs_fastmcp_tasks_uvloop"]
    assert (peer["measured"], peer["met"]) == (None, None)
