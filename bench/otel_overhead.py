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
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

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

#: Hooks that are not one statement or one ``with``: (module, statements, replacement). The
#: statements are found by their syntax tree, so a reformat does not lose them, and must run
#: one after another in one block, exactly once in the module; the replacement (statements
#: or nothing) takes their place at their indent.
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
    # A tasks/* request's span (its is_recording() blocks go with the generic rules; the
    # trace context a task keeps, ``trace_context=carrier()``, with _KEYWORD_HOOKS).
    (
        "engine/core.py",
        "            if not tracing():\n"
        "                return await self._tasks_method(request, method, params, INVALID_SPAN)\n"
        "            name, attributes = _SPANS[method]\n"
        "            with SpanScope(name, attributes, expected=(MCPError,)) as span:\n"
        "                try:\n"
        "                    return await self._tasks_method(request, method, params, span)\n"
        "                except MCPError as exc:\n"
        "                    if span.is_recording():\n"
        "                        span.set_attribute(RPC_STATUS_CODE, str(exc.error.code))\n"
        "                    raise\n",
        "            return await self._tasks_method(request, method, params, None)\n",
    ),
    ("engine/core.py", "        tool = {} if task.work is None else {TOOL: task.work.type}\n", ""),
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
        "            if tracing():\n"
        "                result = await _in_sdk_spans("
        "server, engine, decoded, protocol_version, view)\n"
        "            else:\n"
        "                result = await engine.handle_tasks_method(view, method, params)\n",
        "            result = await engine.handle_tasks_method(view, method, params)\n",
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
#: A keyword argument whose value is a call of one of these goes from its call.
_KEYWORD_HOOKS = frozenset({"carrier"})
_TRAILING_COMMA = re.compile(rb"[ \t]*,[ \t]*")
_LEADING_COMMA = re.compile(rb",\s*$")
_SPAN_WRAPPERS = frozenset({"SpanScope", "Untraced"})
_OBSERVED = re.compile(r"\bobserved\(([\w.]+)\)")


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
                for number in range(node.body[0].lineno - 1, node.end_lineno or node.lineno):
                    dedent[number] = dedent.get(number, 0) + 4
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
        if doomed and isinstance(node, ast.stmt):
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


def _statement_runs(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every block of statements in ``tree`` (a body, an ``else``, a ``finally``)."""
    runs = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                runs.append(block)
    return runs


def _replace_statements(text: str, statements: str, replacement: str) -> str | None:
    """``text`` with ``statements`` (found by syntax, not by layout) replaced by
    ``replacement`` at their indent; ``None`` unless they stand exactly once, one after
    another in one block, on lines of their own."""
    wanted = [ast.dump(node) for node in ast.parse(textwrap.dedent(statements)).body]
    found = [
        run[i : i + len(wanted)]
        for run in _statement_runs(ast.parse(text))
        for i in range(len(run) - len(wanted) + 1)
        if [ast.dump(node) for node in run[i : i + len(wanted)]] == wanted
    ]
    if len(found) != 1:
        return None
    first, last = found[0][0], found[0][-1]
    lines = text.splitlines(keepends=True)
    start, end = first.lineno - 1, last.end_lineno or last.lineno
    before = lines[start].encode()[: first.col_offset]
    after = lines[end - 1].encode()[last.end_col_offset or 0 :].strip()
    if before.strip() or (after and not after.startswith(b"#")):
        return None
    indent = before.decode()
    placed = textwrap.indent(textwrap.dedent(replacement), indent)
    return "".join([*lines[:start], placed, *lines[end:]])


def _drop_keyword_hooks(text: str) -> tuple[str, int]:
    """Delete each keyword argument whose value is a call of :data:`_KEYWORD_HOOKS`, with
    its comma; the rewritten text and how many went."""
    source = text.encode()
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.keyword)
            and isinstance(node.value, ast.Call)
            and _root(node.value.func) in _KEYWORD_HOOKS
        ):
            end_line = node.end_lineno or node.lineno
            end_column = node.end_col_offset or node.col_offset
            spans.append(
                (starts[node.lineno - 1] + node.col_offset, starts[end_line - 1] + end_column)
            )
    for start, end in sorted(spans, reverse=True):
        if trailing := _TRAILING_COMMA.match(source, end):
            cut = (start, trailing.end())
        elif leading := _LEADING_COMMA.search(source, 0, start):
            cut = (leading.start(), end)
        else:
            cut = (start, end)
        line_start = source.rfind(b"\n", 0, cut[0]) + 1
        line_end = source.find(b"\n", cut[1]) % (len(source) + 1)  # -1: the text's end
        if not source[line_start : cut[0]].strip() and not source[cut[1] : line_end].strip():
            cut = (line_start, line_end + 1)  # it stood on a line of its own: the line goes
        source = source[: cut[0]] + source[cut[1] :]
    return source.decode(), len(spans)


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
    for relative, statements, replacement in BESPOKE:
        path = target / relative
        rewritten = _replace_statements(path.read_text(), statements, replacement)
        if rewritten is None:
            raise RuntimeError(
                f"bench.otel_overhead: a hook of {relative} is not where it was "
                f"({statements.strip().splitlines()[0]!r}): update BESPOKE"
            )
        path.write_text(rewritten)
        removed += 1
    problems: list[str] = []
    for path in sorted(target.rglob("*.py")):
        relative = path.relative_to(target).as_posix()
        if relative in HOOK_MODULES:
            continue
        text, wrappers = _OBSERVED.subn(r"\1", path.read_text())
        text, keywords = _drop_keyword_hooks(text)
        text, edits = _generic_edits(text)
        path.write_text(text)
        removed += wrappers + keywords + edits
        problems += _leftovers(path, relative)
    if problems:
        raise RuntimeError(
            "bench.otel_overhead: hooks left in the stripped copy: " + ", ".join(problems)
        )
    return directory, removed


#: How many ``tasks/get`` one in-process probe answers (after as many to warm up).
PROBE_REQUESTS = 20_000


async def probe(requests: int) -> tuple[float, float]:
    """CPU microseconds per ``tasks/get`` answered by our server's ASGI app called directly,
    in this process (no HTTP server, no client: the app's own work, of which the hooks are
    a larger share than of a request over HTTP), and the function calls (Python and C) one
    such request makes: a count no load on the machine moves."""
    from bench.servers import ours_with_tasks  # noqa: PLC0415 (the side's own mcp_tasks)
    from mcp_tasks import NewTask, new_task_id  # noqa: PLC0415
    from mcp_tasks.testing import PROTOCOL, WITH_TASKS  # noqa: PLC0415

    app, tasks = ours_with_tasks("memory://", None)
    async with tasks.running():
        task_id = new_task_id()
        await tasks.store.create(NewTask(task_id=task_id, ttl_ms=None))
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
        }
        params = {"taskId": task_id, "_meta": meta}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params})
        headers = {
            "host": "127.0.0.1:8000",
            "content-type": "application/json",
            "content-length": str(len(body)),
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
            "mcp-method": "tasks/get",
            "mcp-name": task_id,
        }
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
        }
        message = {"type": "http.request", "body": body.encode(), "more_body": False}
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return message

        async def send(reply: dict[str, Any]) -> None:
            sent.append(reply)

        await app(scope, receive, send)
        answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        if sent[0].get("status") != 200 or b'"result"' not in answer:
            raise RuntimeError(f"the probe's tasks/get was answered {sent[0]} {answer!r}")
        for _ in range(requests):  # warm-up
            sent.clear()
            await app(scope, receive, send)
        start = time.process_time()
        for _ in range(requests):
            sent.clear()
            await app(scope, receive, send)
        cpu_us = (time.process_time() - start) / requests * 1e6
        calls = [0]

        def count(frame: object, event: str, arg: object) -> None:
            if event in ("call", "c_call"):
                calls[0] += 1

        sys.setprofile(count)
        for _ in range(100):
            sent.clear()
            await app(scope, receive, send)
        sys.setprofile(None)
        return cpu_us, calls[0] / 100


def probe_on(side_env: dict[str, str]) -> tuple[float, float]:
    """:func:`probe` in a process of its own, with ``side_env``'s ``PYTHONPATH``."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.otel_overhead", "--probe", str(PROBE_REQUESTS)],
        cwd=ROOT,
        env={**os.environ, **side_env},
        capture_output=True,
        text=True,
        check=True,
    )
    cpu_us, calls = done.stdout.strip().splitlines()[-1].split()
    return float(cpu_us), float(calls)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


#: Each figure a round measures on each side: its key, what it is, how a value reads.
FIGURES = (
    ("rps", "tasks/get requests/s", "{:,.0f}/s"),
    ("per_get", "tasks/get server CPU per request", "{:.0f} us"),
    ("per_task", "server CPU per task", "{:.3f} ms"),
    ("in_process", "in-process tasks/get CPU", "{:.1f} us"),
    ("calls", "in-process tasks/get function calls", "{:.0f}"),
)


def report(figures: dict[str, dict[str, list[float]]]) -> None:
    """Each figure's ratio (with hooks / stripped) over the rounds: median and range."""
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for key, what, _ in FIGURES:
        sides = figures[key]
        ratios = [a / b for a, b in zip(sides["hooks"], sides["stripped"], strict=True)]
        print(f"{what}, hooks / stripped: {spread(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0, help="wrk seconds per round")
    parser.add_argument("--tasks", type=int, default=600, help="tasks per CPU round")
    parser.add_argument("--quick", action="store_true", help="4 rounds of 2 s and 200 tasks")
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)  # one side's probe
    args = parser.parse_args()
    if args.probe:
        print(*asyncio.run(probe(args.probe)))
        return
    if args.quick:
        args.rounds, args.seconds, args.tasks = 4, 2.0, 200
    wrk = ensure_wrk()
    figures: dict[str, dict[str, list[float]]] = {
        key: {"hooks": [], "stripped": []} for key, _, _ in FIGURES
    }
    with tempfile.TemporaryDirectory(prefix="otel-overhead-") as tmp, ExitStack() as stack:
        stripped, removed = strip_hooks(Path(tmp))
        print(f"hooks removed from the copy: {removed}; load average {os.getloadavg()[0]:.1f}")
        envs: dict[str, dict[str, str]] = {"hooks": {}, "stripped": {"PYTHONPATH": str(stripped)}}
        sides: dict[str, tuple[Target, int, Path]] = {}
        for name, path in envs.items():
            port = free_port()
            argv = [sys.executable, "-m", "bench.servers", "ours", "--store", "memory://"]
            target = Target(name, [*argv, "--port", str(port), "--max-rows", "0"], port, "tasks")
            # No SDK set up on either side, whatever this shell's OTEL_* say.
            env = {**path, "OTEL_TRACES_EXPORTER": "", "OTEL_METRICS_EXPORTER": ""}
            process = stack.enter_context(server_process(target.argv, port, env=env))
            method, params, routed = repeated_request(target)
            check_answer(target, method, params, routed)
            script = wrk_script(method, params, routed, Path(tmp) / f"{name}.lua")
            run_wrk(wrk, target.port, script, 1, 50)  # warm-up
            asyncio.run(drive(target.port, 50, 50, 0, 50))  # warm-up
            sides[name] = (target, process.pid, script)
        for round_ in range(args.rounds):
            # Which side goes first alternates too: neither always meets the busier half.
            for name in list(sides) if round_ % 2 == 0 else list(reversed(sides)):
                target, pid, script = sides[name]
                before = cpu_seconds(pid)
                rate = run_wrk(wrk, target.port, script, args.seconds, 50)
                figures["rps"][name].append(rate)
                cpu_us = (cpu_seconds(pid) - before) * 1e6
                figures["per_get"][name].append(cpu_us / (rate * args.seconds))
                before = cpu_seconds(pid)
                asyncio.run(drive(target.port, args.tasks, 50, 200, 50))
                figures["per_task"][name].append((cpu_seconds(pid) - before) * 1000 / args.tasks)
                cpu_us, calls = probe_on(envs[name])
                figures["in_process"][name].append(cpu_us)
                figures["calls"][name].append(calls)
            print(
                f"round {round_ + 1}: "
                + "; ".join(
                    f"{what} "
                    + ", ".join(f"{n} {shown.format(figures[key][n][-1])}" for n in sides)
                    for key, what, shown in FIGURES
                ),
                flush=True,
            )
    report(figures)


if __name__ == "__main__":
    main()
