"""What the OpenTelemetry hooks cost with no SDK set up: this checkout served side by side
with the same checkout with every hook stripped out, in alternating rounds of ``tasks/get``
under wrk and of end-to-end tasks.

"Hooks removed" is this commit's own ``mcp_tasks`` source, copied and rewritten here before
the run (:func:`strip_hooks`): every span (``with SpanScope(…)`` and ``with Untraced()``
unwrapped to their bodies, the run's span and its ``is_recording()`` blocks deleted), every
measurement and count (``instruments.….add/record``, ``count_end``), the store wrapper
(``observed(store)`` is ``store``), the trace context a task keeps (``carrier()``) and the
fast path's look for the SDK's span middleware and a tracer provider. The rewrite fails
loudly when a hook it knows is not where it expects it, and a check afterwards refuses a
copy that still calls any telemetry name.

Both servers run the memory store with no SDK set up, the stripped one with the copy first
on ``PYTHONPATH``. Figures: ``tasks/get`` requests per second and server CPU (utime + stime
from /proc) per request, and server CPU per completed task over the end-to-end workload;
each round's ratio (with hooks / without), their median and range::

    uv run --group bench python -m bench.otel_overhead --quick
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench.common import ROOT, cpu_seconds, free_port, server_process
from bench.served import (
    Target,
    check_answer,
    drive,
    ensure_wrk,
    repeated_request,
    run_wrk,
    wrk_script,
)

SOURCE = ROOT / "packages" / "mcp-tasks" / "src" / "mcp_tasks"

#: The hooks' own modules, and the SDK's set-up at a command's start: left as they are
#: (nothing else calls them any more).
HOOK_MODULES = frozenset({"telemetry.py", "stores/observed.py", "runtime/gauges.py", "cli/otel.py"})

#: Hooks that are not one statement or one ``with``: (module, text, replacement). Each text
#: must be found exactly once.
BESPOKE: tuple[tuple[str, str, str], ...] = (
    # The run's span, entered and ended by hand around the body, and its timing.
    (
        "runtime/runner.py",
        "        started = time.perf_counter()\n"
        "        self._first_run_delay(claimed)\n"
        "        scope = self._run_span(claimed, adopted)\n"
        "        scope.__enter__()\n",
        "",
    ),
    (
        "runtime/runner.py",
        "            attributes = {**tool_attributes(claimed.record), OUTCOME: outcome}\n",
        "",
    ),
    (
        "runtime/runner.py",
        "            try:\n"
        "                if not finished:\n"
        "                    with anyio.CancelScope(shield=True):\n"
        "                        await self._release(\n"
        "                            Claimed(claimed.record, context.lease), claimable=not ended\n"
        "                        )\n"
        "            finally:\n"
        "                scope.span.set_attribute(OUTCOME, outcome)\n"
        "                scope.__exit__(None, None, None)\n",
        "            if not finished:\n"
        "                with anyio.CancelScope(shield=True):\n"
        "                    await self._release(\n"
        "                        Claimed(claimed.record, context.lease), claimable=not ended\n"
        "                    )\n",
    ),
    # A tasks/* request's span (its is_recording() blocks go with the generic rules).
    (
        "engine/core.py",
        "        name, attributes = _SPANS[method]\n"
        "        with SpanScope(name, attributes, expected=(MCPError,)) as span:\n"
        "            try:\n"
        "                return await self._tasks_method(request, method, params, span)\n"
        "            except MCPError as exc:\n"
        "                if span.is_recording():\n"
        "                    span.set_attribute(RPC_STATUS_CODE, str(exc.error.code))\n"
        "                raise\n",
        "        return await self._tasks_method(request, method, params, None)\n",
    ),
    ("engine/core.py", "        tool = {} if task.work is None else {TOOL: task.work.type}\n", ""),
    ("engine/core.py", "                        trace_context=carrier(),\n", ""),
    # An input round's count and wait.
    ("runtime/context.py", "        self._measured = {} if tool is None else {TOOL: tool}\n", ""),
    ("runtime/context.py", "            asked_at: float | None = None\n", ""),
    ("runtime/context.py", "                asked_at = time.perf_counter()\n", ""),
    (
        "runtime/context.py",
        "                    if asked_at is not None:\n"
        "                        waited = time.perf_counter() - asked_at\n"
        "                        instruments.input_wait.record(waited, self._measured)\n",
        "",
    ),
    # The fast path's look for the SDK's span middleware and a tracer provider.
    (
        "adapters/fast_path.py",
        "            result = await _in_sdk_spans("
        "server, request, verdict.protocol_version, handle)\n",
        "            result = await handle(None)\n",
    ),
)

#: Names that are telemetry: none may be used outside :data:`HOOK_MODULES` once stripped
#: (imports aside, and the bodies of the two runner helpers nothing calls any more).
TELEMETRY_NAMES = frozenset(
    {
        "SpanScope",
        "Untraced",
        "instruments",
        "count_end",
        "observed",
        "carrier",
        "tracing",
        "links_to",
        "context_of",
        "fresh_trace",
        "tool_attributes",
        "get_tracer_provider",
        "is_recording",
        "_run_span",
        "_first_run_delay",
        "_in_sdk_spans",
        "_measured",
    }
)
_DEAD_HELPERS = frozenset({"_run_span", "_first_run_delay", "_in_sdk_spans"})
_SPAN_WRAPPERS = frozenset({"SpanScope", "Untraced"})
_OBSERVED = re.compile(r"\bobserved\((\w+)\)")


def _root(node: ast.expr) -> str | None:
    """The name a dotted call target starts from (``instruments`` in ``instruments.a.add``)."""
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _generic_edits(text: str) -> tuple[str, int]:
    """Delete measurement statements and span-only blocks, and unwrap span ``with``s; the
    rewritten text and how many hooks went."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    deleted: set[int] = set()  # 0-based line numbers
    dedent: dict[int, int] = {}
    spans = {"span"}  # a span passed in by name (``_tasks_method``), and each ``as`` target
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and len(node.items) == 1:
            item = node.items[0].context_expr
            if isinstance(item, ast.Call) and _root(item.func) in _SPAN_WRAPPERS:
                target = node.items[0].optional_vars
                if isinstance(target, ast.Name):
                    spans.add(target.id)
                deleted.update(range(node.lineno - 1, node.body[0].lineno - 1))
                for line in range(node.body[0].lineno - 1, node.end_lineno or node.lineno):
                    dedent[line] = dedent.get(line, 0) + 4
                count += 1
    for node in ast.walk(tree):
        doomed = False
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            root = _root(node.value.func)
            doomed = root in {"instruments", "count_end"} or root in spans
        elif isinstance(node, ast.If) and not node.orelse:
            test = node.test
            recording = isinstance(test, ast.Call) and _root(test.func) in spans
            only_hooks = all(
                isinstance(s, ast.Expr)
                and isinstance(s.value, ast.Call)
                and _root(s.value.func) in {"instruments", "count_end"}
                for s in node.body
            )
            doomed = recording or only_hooks
        if doomed:
            deleted.update(range(node.lineno - 1, node.end_lineno or node.lineno))
            count += 1
    out = []
    for number, line in enumerate(lines):
        if number in deleted:
            continue
        cut = dedent.get(number, 0)
        if cut and line.strip():
            assert line[:cut].strip() == "", line
        out.append(line[cut:] if line.strip() else line)
    return "".join(out), count


def _leftovers(path: Path, relative: str) -> list[str]:
    """Every use of a telemetry name left in a stripped module."""
    tree = ast.parse(path.read_text())
    found = []
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _DEAD_HELPERS:
            skip.update(id(inner) for inner in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else None
        )
        if name in TELEMETRY_NAMES:
            found.append(f"{relative}:{node.lineno} {name}")  # type: ignore[attr-defined]
    return found


def strip_hooks(directory: Path, source: Path = SOURCE) -> tuple[Path, int]:
    """A copy of ``source`` (this checkout's ``mcp_tasks``) under ``directory`` with every
    hook removed: the folder to put first on ``PYTHONPATH``, and how many hooks went.

    Raises:
        RuntimeError: a hook is not where this rewrite expects it, or one is left.
    """
    target = directory / "mcp_tasks"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    removed = 0
    for relative, text, replacement in BESPOKE:
        path = target / relative
        source = path.read_text()
        if source.count(text) != 1:
            raise RuntimeError(
                f"bench.otel_overhead: a hook of {relative} is not where it was "
                f"({text.strip().splitlines()[0]!r}): update BESPOKE"
            )
        path.write_text(source.replace(text, replacement))
        removed += 1
    problems: list[str] = []
    for path in sorted(target.rglob("*.py")):
        relative = path.relative_to(target).as_posix()
        if relative in HOOK_MODULES:
            continue
        source = path.read_text()
        source, wrappers = _OBSERVED.subn(r"\1", source)
        source, edits = _generic_edits(source)
        path.write_text(source)
        removed += wrappers + edits
        problems += _leftovers(path, relative)
    if problems:
        raise RuntimeError(
            "bench.otel_overhead: hooks left in the stripped copy: " + ", ".join(problems)
        )
    return directory, removed


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0, help="wrk seconds per round")
    parser.add_argument("--tasks", type=int, default=600, help="tasks per CPU round")
    parser.add_argument("--quick", action="store_true", help="4 rounds of 2 s and 200 tasks")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.tasks = 4, 2.0, 200
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="otel-overhead-") as tmp, ExitStack() as stack:
        stripped, removed = strip_hooks(Path(tmp))
        print(f"hooks removed from the copy: {removed}; load average {os.getloadavg()[0]:.1f}")
        sides: dict[str, tuple[Target, int]] = {}
        for name, path in (("hooks", {}), ("stripped", {"PYTHONPATH": str(stripped)})):
            port = free_port()
            argv = [sys.executable, "-m", "bench.servers", "ours", "--store", "memory://"]
            target = Target(name, [*argv, "--port", str(port), "--max-rows", "0"], port, "tasks")
            # No SDK set up on either side, whatever this shell's OTEL_* say.
            env = {**path, "OTEL_TRACES_EXPORTER": "", "OTEL_METRICS_EXPORTER": ""}
            process = stack.enter_context(server_process(target.argv, port, env=env))
            sides[name] = (target, process.pid)
        scripts = {}
        for name, (target, _) in sides.items():
            method, params, routed = repeated_request(target)
            check_answer(target, method, params, routed)
            scripts[name] = wrk_script(method, params, routed, Path(tmp) / f"{name}.lua")
            run_wrk(wrk, target.port, scripts[name], 1, 50)  # warm-up
            asyncio.run(drive(target.port, 50, 50, 0, 50))  # warm-up
        rps: dict[str, list[float]] = {name: [] for name in sides}
        per_get: dict[str, list[float]] = {name: [] for name in sides}
        per_task: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(args.rounds):
            # Which side goes first alternates too: neither always meets the busier half.
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                target, pid = sides[name]
                before = cpu_seconds(pid)
                rate = run_wrk(wrk, target.port, scripts[name], args.seconds, 50)
                rps[name].append(rate)
                per_get[name].append((cpu_seconds(pid) - before) / (rate * args.seconds) * 1e6)
                before = cpu_seconds(pid)
                asyncio.run(drive(target.port, args.tasks, 50, 200, 50))
                per_task[name].append((cpu_seconds(pid) - before) * 1000 / args.tasks)
            print(
                f"round {round_ + 1}: tasks/get "
                + ", ".join(f"{n} {rps[n][-1]:,.0f}/s {per_get[n][-1]:.0f} us" for n in sides)
                + "; CPU per task "
                + ", ".join(f"{n} {per_task[n][-1]:.3f} ms" for n in sides),
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.1f}")

    def ratios(figures: dict[str, list[float]]) -> list[float]:
        return [a / b for a, b in zip(figures["hooks"], figures["stripped"], strict=True)]

    print(f"tasks/get requests/s, hooks / stripped: {spread(ratios(rps))}")
    print(f"tasks/get server CPU per request, hooks / stripped: {spread(ratios(per_get))}")
    print(f"server CPU per task, hooks / stripped: {spread(ratios(per_task))}")


if __name__ == "__main__":
    main()
