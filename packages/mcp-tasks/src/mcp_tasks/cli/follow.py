"""The client side of `call`, `get`, `watch` and `cancel`: following a task, showing its
progress, answering its input requests, reconnecting when the server goes away, and each
outcome's last words (`mcp-tasks COMMAND: …`, at most one next step, the exit code).

A user's task is never cancelled on their behalf: only Ctrl-C during `call` cancels it.
Input nobody answers here leaves the task waiting, with the `mcp-tasks watch` line that
answers it; a server that goes away is retried for `--reconnect-for` seconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit

import anyio
import httpx2 as httpx
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_tasks.cli._errors import EXIT_CHECK_FAILED, EXIT_INTERRUPTED, CLIError, leaves, one_line
from mcp_tasks.cli.answer_check import check_given_answer, field_problem
from mcp_tasks.cli.client_args import (
    EXIT_CALL_ERROR,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_INPUT_REQUIRED,
    EXIT_OK,
    EXIT_TOOL_ERROR,
    answer_word,
    watch_line,
)
from mcp_tasks.client import CreateTaskResult, TaskHandle, TaskState, start_tool, tasks_client

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable, Mapping

    from mcp.client.client import Client
    from mcp.client.session import ClientRequestContext
    from rich.progress import Progress, TaskID

# A status message ending in "3/4" or "(3/4)" carries its progress numbers: the wire has
# no progress field for a task, so a server puts them in the message.
PROGRESS_NUMBERS = re.compile(r"\(?(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\)?\s*$")
FIRST_RETRY_S = 0.25
MAX_RETRY_S = 5.0


def progress_of(message: str | None) -> tuple[float, float] | None:
    """(done, total) when `message` ends in them, else `None`."""
    found = PROGRESS_NUMBERS.search(message or "")
    if found is None or float(found[2]) <= 0:
        return None
    return float(found[1]), float(found[2])


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def _status_text(state: TaskState | CreateTaskResult) -> str:
    return state.status + (f" — {state.status_message}" if state.status_message else "")


def _ending(state: TaskState | CreateTaskResult) -> str:
    """A terminal state for a person: a completed task whose result is the tool's own
    error (`isError`) failed, as far as its user is concerned."""
    result = state.result if isinstance(state, TaskState) else None
    if state.status == "completed" and result is not None and result.get("isError") is True:
        return "failed as a tool error"
    return state.status


def _live_bar(stream: TextIO, since: float) -> Progress:
    """A rich progress display on `stream`: description, bar, done/total and percentage,
    time since `since`. Imported here, on a terminal only: the rest of the CLI needs no rich."""
    from rich.console import Console as RichConsole  # noqa: PLC0415
    from rich.progress import BarColumn, ProgressColumn, TextColumn  # noqa: PLC0415
    from rich.progress import Progress as RichProgress  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    class Elapsed(ProgressColumn):
        def render(self, task: object) -> Text:
            return Text(_duration(time.monotonic() - since), style="progress.elapsed")

    return RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[numbers]}"),
        Elapsed(),
        console=RichConsole(file=stream, force_terminal=True, highlight=False),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )


class Console:
    """Status output on stderr: a live progress bar on a terminal (done/total, percent,
    elapsed), one line per change otherwise. Once the task ends, its last progress message
    is not shown as if current: only the outcome stays."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()
        self.since = time.monotonic()
        self._progress: Progress | None = None
        self._bar: TaskID | None = None

    def status(self, state: TaskState | CreateTaskResult) -> None:
        if not self.live:
            text = _ending(state) if state.is_terminal else _status_text(state)
            self.line(f"task: {text}")
        elif state.is_terminal:
            self.pause()
            self.line(f"task: {_ending(state)} after {_duration(time.monotonic() - self.since)}")
        else:
            self._show(state)

    def _show(self, state: TaskState | CreateTaskResult) -> None:
        numbers = progress_of(state.status_message)
        done, total = numbers if numbers is not None else (0.0, None)
        fields: dict[str, Any] = {
            "description": _status_text(state),
            "completed": done,
            "total": total,
            "numbers": "" if total is None else f"{done:g}/{total:g} {min(done / total, 1):4.0%}",
        }
        if self._progress is not None and self._bar is not None:
            self._progress.update(self._bar, **fields)
            return
        self._progress = _live_bar(self.stream, self.since)
        self._bar = self._progress.add_task(
            fields.pop("description"), numbers=fields.pop("numbers"), **fields
        )
        self._progress.start()

    def pause(self) -> None:
        """Take the live bar away (a prompt or the last words follow); the next status
        brings it back."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._bar = None

    def line(self, text: str) -> None:
        self.pause()
        self.stream.write(text + "\n")
        self.stream.flush()

    def write(self, text: str) -> None:
        self.pause()
        self.stream.write(text)
        self.stream.flush()


class InputUnanswerable(Exception):
    """An input request had no `--answer`, and there was no terminal to ask (or `--no-input`)."""

    def __init__(self, key: str, request: Mapping[str, Any]) -> None:
        super().__init__(key)
        self.key = key
        params = request.get("params")
        self.params: dict[str, Any] = dict(params) if isinstance(params, dict) else {}

    @property
    def question(self) -> str:
        message = self.params.get("message")
        return f"{self.key}: {message}" if isinstance(message, str) and message else self.key

    def example(self) -> dict[str, Any]:
        """A plausible answer to the form: each field with a value of its type."""
        schema = self.params.get("requestedSchema")
        fields = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(fields, dict) or not fields:
            return {"action": "accept"}
        return {name: _example_value(spec) for name, spec in fields.items()}


def _example_value(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return "..."
    if "default" in spec:
        return spec["default"]
    if isinstance(spec.get("enum"), list) and spec["enum"]:
        return spec["enum"][0]
    examples: dict[Any, Any] = {"boolean": True, "integer": 1, "number": 1, "array": []}
    return examples.get(spec.get("type"), "...")


def _coerce(raw: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "boolean":
        return raw.strip().lower() in {"y", "yes", "true", "1"}
    if kind == "integer":
        return int(raw)
    if kind == "number":
        return float(raw)
    return raw


class Answerer:
    """Answers input requests: `--answer` first, else a prompt per form field on a terminal.

    While a task's question is prompted for, the task is polled: once it no longer waits
    for that key (answered from another client or server, or it moved on), the prompt is
    dropped and following goes on.
    """

    def __init__(
        self, given: dict[str, dict[str, Any]], console: Console, *, interactive: bool
    ) -> None:
        self.given = given
        self.console = console
        self.interactive = interactive

    def for_task(self, handle: TaskHandle) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
        async def answer(key: str, request: dict[str, Any]) -> dict[str, Any] | None:
            return await self._answer(key, request, handle)

        return answer

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The session's elicitation callback: input asked before any task exists."""
        request = {
            "method": "elicitation/create",
            "params": params.model_dump(by_alias=True, mode="json", exclude_none=True),
        }
        answer = await self._answer(str(context.request_id), request, None)
        return types.ElicitResult.model_validate(answer or {"action": "cancel"})

    async def _answer(
        self, key: str, request: dict[str, Any], handle: TaskHandle | None
    ) -> dict[str, Any] | None:
        if key in self.given:
            check_given_answer(key, request, self.given[key])
            return self.given[key]
        params = request.get("params")
        if (
            not self.interactive
            or request.get("method") != "elicitation/create"
            or not isinstance(params, dict)
            or params.get("mode", "form") != "form"
        ):
            raise InputUnanswerable(key, request)
        typed = await self._prompt(key, params, handle)
        if typed is not None and handle is not None:
            # Kept: sent again, unasked, if the first send is lost (a blip, a restart).
            self.given[key] = typed
        return typed

    async def _prompt(
        self, key: str, params: dict[str, Any], handle: TaskHandle | None
    ) -> dict[str, Any] | None:
        self.console.line(f"? {params.get('message') or key}")
        outcome: dict[str, Any] | None = None
        async with anyio.create_task_group() as group:

            async def ask() -> None:
                nonlocal outcome
                outcome = await self._fields(params.get("requestedSchema"))
                group.cancel_scope.cancel()

            async def elsewhere(handle: TaskHandle) -> None:
                await _until_answered(handle, key)
                self.console.line("\n  answered elsewhere; going on")
                group.cancel_scope.cancel()

            group.start_soon(ask)
            if handle is not None:
                group.start_soon(elsewhere, handle)
        return outcome

    async def _fields(self, schema: Any) -> dict[str, Any]:
        properties = schema.get("properties") if isinstance(schema, dict) else None
        content: dict[str, Any] = {}
        for field, given in (properties or {}).items():
            spec: dict[str, Any] = given if isinstance(given, dict) else {}
            label = spec.get("title") or spec.get("description") or field
            kind = spec.get("type", "string")
            while True:
                raw = await self._read_line(f"  {label} [{kind}]: ")
                if raw == "":
                    return {"action": "decline"}
                try:
                    value = _coerce(raw, spec)
                except ValueError:
                    self.console.line(f"  that is not a {kind}; again (empty: decline)")
                    continue
                problem = field_problem(field, spec, value)
                if problem is None:
                    content[field] = value
                    break
                self.console.line(f"  {problem}; again (empty: decline)")
        return {"action": "accept", "content": content}

    async def _read_line(self, prompt: str) -> str:
        """One line typed at the terminal, read without a thread so a prompt can be dropped."""
        self.console.write(prompt)
        fd = sys.stdin.fileno()
        await anyio.wait_readable(fd)
        return os.read(fd, 65536).decode(errors="replace").rstrip("\r\n")


async def _until_answered(handle: TaskHandle, key: str) -> None:
    """Return once the task no longer waits for `key`."""
    interval_ms = (handle.created.poll_interval_ms if handle.created else None) or 1000
    while True:
        await anyio.sleep(max(interval_ms, 50) / 1000)
        state = await handle.get()
        if state.poll_interval_ms:
            interval_ms = state.poll_interval_ms
        if state.status != "input_required" or key not in (state.input_requests or {}):
            return


def render_result(result: types.CallToolResult, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            result.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2
        )
    parts = [
        block.text
        if isinstance(block, types.TextContent)
        else json.dumps(block.model_dump(by_alias=True, mode="json", exclude_none=True))
        for block in result.content
    ]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def describe(state: TaskState) -> str:
    """A task's state for a person: status and message, then its outcome or questions."""
    lines = [_status_text(state)]
    if state.status == "completed":
        lines.append(render_result(state.call_tool_result(), as_json=False))
    elif state.status == "failed":
        error = state.error or {}
        lines.append(f"error {error.get('code')}: {error.get('message')}")
    elif state.status == "input_required":
        keys = ", ".join(sorted(state.input_requests or {}))
        lines.append(f"waiting for input: {keys} (answer with mcp-tasks watch … --answer)")
    return "\n".join(lines)


def connection_lost(error: BaseException) -> BaseException | None:
    """The leaf of `error` that says the server could not be reached, if any."""
    for leaf in leaves(error):
        if isinstance(leaf, httpx.TransportError | OSError):
            return leaf
        if isinstance(leaf, MCPError) and leaf.message == "Connection closed":
            return leaf
    return None


def _reason(error: BaseException) -> str:
    return one_line(str(error)) or type(error).__name__


#: The message an mcp-tasks server answers -32603 with while its task store is away.
STORE_UNAVAILABLE = "Task store unavailable"

FORGOTTEN = (
    "the server no longer knows this task "
    "(a server on a memory store loses its tasks when it restarts)"
)


def task_forgotten(error: BaseException) -> bool:
    """Whether `error` says the task is not found: said of a task this command followed,
    the server forgot it."""
    return any(
        isinstance(leaf, MCPError)
        and leaf.code == types.INVALID_PARAMS
        and leaf.message.endswith("Task not found")
        for leaf in leaves(error)
    )


class Outage:
    """Something `call` and `watch` wait out while they follow a task: the server gone
    (a restart), or its task store unavailable (a blip)."""

    def __init__(self, *, began: str, retrying: str, to: str, cause: str, back: str) -> None:
        self.began, self.retrying, self.to, self.cause = began, retrying, to, cause
        self.back = back
        self.since = time.monotonic()

    @classmethod
    def of(cls, error: BaseException, url: str) -> Outage | None:
        """The outage `error` is a sign of; `None` when it is none (it is then final)."""
        lost = connection_lost(error)
        if lost is not None:
            return cls(
                began=f"lost {one_line(url)} ({_reason(lost)})",
                retrying="reconnecting",
                to=f"to {one_line(url)}",
                cause=_reason(lost),
                back="reconnected",
            )
        for leaf in leaves(error):
            if (
                isinstance(leaf, MCPError)
                and leaf.code == types.INTERNAL_ERROR
                and leaf.message == STORE_UNAVAILABLE
            ):
                said = f"error {leaf.code}: {leaf.message}"
                return cls(
                    began=f"the server's task store is unavailable ({said})",
                    retrying="retrying",
                    to=f"{one_line(url)}",
                    cause=f"its task store stayed unavailable: {said}",
                    back="the server's task store is back",
                )
        return None


def explain_remote(raw: BaseException, url: str, *, by_id: bool) -> CLIError | None:
    """The one-line form of a failure talking to the server; `None` for a bug."""
    for leaf in leaves(raw):
        if isinstance(leaf, CLIError):
            return leaf
    lost = connection_lost(raw)
    if lost is not None:
        return CLIError(f"cannot reach {one_line(url)}: {_reason(lost)}", code=EXIT_CALL_ERROR)
    error = next((leaf for leaf in leaves(raw) if isinstance(leaf, MCPError)), None)
    if error is None:
        return None
    said = f"error {error.code}: {one_line(error.message)}"
    if error.code == types.METHOD_NOT_FOUND and error.message == "Not Found":
        path = urlsplit(url).path.rstrip("/")
        hint = None
        if not path.endswith("/mcp"):
            hint = f"is the MCP endpoint at {url.rstrip('/')}/mcp? (mcp-tasks serve serves /mcp)"
        return CLIError(
            f"{one_line(url)} answered 404 Not Found: no MCP endpoint there",
            hint=hint,
            code=EXIT_CALL_ERROR,
        )
    if by_id and error.code == types.INVALID_PARAMS:
        return CLIError(f"no such task on {one_line(url)} ({said})", code=EXIT_CALL_ERROR)
    return CLIError(said, code=EXIT_CALL_ERROR)


class Interrupts:
    """Ctrl-C, turned into a cancelled scope so the command can still act (cancel the
    task in `call`) and say what became of the task."""

    def __init__(self) -> None:
        self.hit = False
        self.scope: anyio.CancelScope | None = None
        self.fate = ""  # what became of the task, for the last words

    async def listen(self, outer: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.hit = True
                (self.scope or outer).cancel()


def _run(
    command: str, url: str, body: Callable[[Interrupts], Awaitable[int]], *, by_id: bool
) -> int:
    """Run `body` with Ctrl-C handled; translate what the server did into last words."""
    interrupts = Interrupts()

    async def main() -> int:
        async with anyio.create_task_group() as group:
            group.start_soon(interrupts.listen, group.cancel_scope)
            try:
                return await body(interrupts)
            finally:
                group.cancel_scope.cancel()
        return EXIT_INTERRUPTED  # cancelled by Ctrl-C outside any task's scope

    try:
        code = anyio.run(main)
    except Exception as raw:  # a boundary: expected failures are last words, bugs a traceback
        error = explain_remote(raw, url, by_id=by_id)
        if error is None:
            raise
        raise error from raw
    if interrupts.hit:
        fate = f"; {interrupts.fate}" if interrupts.fate else ""
        print(f"\nmcp-tasks {command}: interrupted{fate}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


class Follower:
    """Follows one task to its end for `call` or `watch`, over as many connections as a
    server restart takes."""

    def __init__(
        self,
        args: argparse.Namespace,
        answers: dict[str, dict[str, Any]],
        *,
        command: str,
        task_id: str | None,
        cancel_on_interrupt: bool,
    ) -> None:
        self.args = args
        self.url: str = args.url
        self.command = command
        self.task_id = task_id
        self.cancel_on_interrupt = cancel_on_interrupt
        self.console = Console(sys.stderr)
        self.interactive = not args.no_input and sys.stdin.isatty()
        self.answerer = Answerer(answers, self.console, interactive=self.interactive)
        self.handle: TaskHandle | None = None

    def client(self) -> Client:
        return tasks_client(self.url, elicitation_callback=self.answerer.elicit)

    async def run(
        self, interrupts: Interrupts, first: Callable[[Client], Awaitable[TaskHandle | int]]
    ) -> int:
        """`first` makes or finds the task (an int: no task, that exit code); then follow
        it, retrying for at most `--reconnect-for` seconds while the server is away or
        answers that its task store is."""
        connected = False
        away: Outage | None = None
        delay = FIRST_RETRY_S
        while True:
            try:
                async with self.client() as client:
                    with anyio.CancelScope() as work:
                        interrupts.scope = work
                        if not connected:
                            found = await first(client)
                            if isinstance(found, int):
                                return found
                            handle = found
                            connected = True
                        else:
                            assert self.task_id is not None
                            handle = TaskHandle.attach(client, self.task_id)
                            await handle.get()  # the server (and its store) is back
                            back = away.back if away is not None else "reconnected"
                            self.console.line(f"mcp-tasks {self.command}: {back}")
                        self.handle = handle
                        away, delay = None, FIRST_RETRY_S
                        return await self.follow(handle)
                    interrupts.scope = None
                    await self._interrupted(interrupts)
                    return EXIT_INTERRUPTED
            except Exception as raw:
                if not connected or self.task_id is None:
                    raise
                if task_forgotten(raw):
                    raise CLIError(FORGOTTEN, code=EXIT_CALL_ERROR) from raw
                outage = Outage.of(raw, self.url)
                if outage is None:
                    raise
                bound: float = self.args.reconnect_for
                if away is None:
                    away = outage
                    self.console.line(
                        f"mcp-tasks {self.command}: {outage.began}; "
                        f"{outage.retrying} for up to {bound:g} s"
                    )
                waited = time.monotonic() - away.since
                if waited >= bound:
                    raise CLIError(
                        f"gave up {outage.retrying} {outage.to} after {bound:g} s "
                        f"({outage.cause}); the task may still be running there",
                        hint=f"follow it later: {self.later(self.task_id)}",
                        code=EXIT_CALL_ERROR,
                    ) from raw
            await anyio.sleep(min(delay, max(bound - waited, 0)))
            delay = min(delay * 2, MAX_RETRY_S)

    async def _interrupted(self, interrupts: Interrupts) -> None:
        """After Ctrl-C: `call` cancels its task, then reads back what it really is."""
        if not self.cancel_on_interrupt or self.handle is None:
            interrupts.fate = "the task goes on" if self.handle is not None else ""
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            try:
                await self.handle.cancel()
                status = (await self.handle.get()).status
                fate = (
                    "the task was cancelled" if status == "cancelled" else f"the task is {status}"
                )
            except Exception as failure:  # reported in the last words
                fate = f"cancelling the task failed ({_reason(failure)}); it may still run"
            interrupts.fate = fate

    async def follow(self, handle: TaskHandle) -> int:
        """Wait for the task's end; print its result; the exit code (0, 1, 3, 4, 5)."""

        async def on_status(state: TaskState) -> None:
            self.console.status(state)

        try:
            state = await handle.wait(answer=self.answerer.for_task(handle), on_status=on_status)
        except Exception as raw:
            unanswerable = next(
                (leaf for leaf in leaves(raw) if isinstance(leaf, InputUnanswerable)), None
            )
            if unanswerable is None:
                raise
            raise self.input_required(unanswerable, handle.task_id) from raw
        if state.status == "failed":
            error = state.error or {}
            raise CLIError(
                f"the task failed: error {error.get('code')}: {error.get('message')}",
                code=EXIT_FAILED,
            )
        if state.status == "cancelled":
            return EXIT_CANCELLED
        result = state.call_tool_result()
        sys.stdout.write(render_result(result, self.args.json) + "\n")
        return EXIT_TOOL_ERROR if result.is_error else EXIT_OK

    def _why_not_asked(self, key: str) -> str:
        where = "--no-input" if self.args.no_input else "no terminal to ask"
        return f"no --answer {key}=… and {where}"

    def input_required(self, need: InputUnanswerable, task_id: str | None) -> CLIError:
        """The last words when input nobody answers here is asked (exit 5)."""
        example = need.example()
        why = self._why_not_asked(need.key)
        if task_id is None:
            return CLIError(
                f"the tool needs input before it starts: {need.question} ({why})",
                hint=f"call again with --answer {answer_word(need.key, example)}",
                code=EXIT_INPUT_REQUIRED,
            )
        return CLIError(
            f"the task needs input: {need.question} ({why}); it is left waiting",
            hint=f"answer it with: {self.later(task_id, need.key, example)}",
            code=EXIT_INPUT_REQUIRED,
        )

    def later(self, task_id: str, key: str | None = None, example: Any = None) -> str:
        """How to go on with the task later. `call` printed its id, so its line is exact;
        `watch` was given the id, and prints it nowhere."""
        if self.command == "call":
            return watch_line(self.url, task_id, key, example)
        answer = f" with --answer {answer_word(key, example)}" if key is not None else ""
        return f"run this watch again{answer}"


def run_call(
    args: argparse.Namespace, arguments: dict[str, Any], answers: dict[str, dict[str, Any]]
) -> int:
    follower = Follower(args, answers, command="call", task_id=None, cancel_on_interrupt=True)

    async def first(client: Client) -> TaskHandle | int:
        try:
            started = await start_tool(client, args.tool, arguments)
        except Exception as raw:
            need = next((leaf for leaf in leaves(raw) if isinstance(leaf, InputUnanswerable)), None)
            if need is None:
                raise
            raise follower.input_required(need, None) from raw
        if not isinstance(started, TaskHandle):
            sys.stdout.write(render_result(started, args.json) + "\n")
            return EXIT_TOOL_ERROR if started.is_error else EXIT_OK
        follower.task_id = started.task_id
        # The id, on this user's stderr only: how to find the task again.
        follower.console.line(
            f"task id: {started.task_id} (mcp-tasks get|watch|cancel {args.url} ID)"
        )
        if started.created is not None:
            follower.console.status(started.created)
        return started

    async def body(interrupts: Interrupts) -> int:
        return await follower.run(interrupts, first)

    return _run("call", args.url, body, by_id=False)


def run_watch(args: argparse.Namespace, answers: dict[str, dict[str, Any]]) -> int:
    """Follow the task as `call` does; Ctrl-C stops watching and leaves the task be."""
    follower = Follower(
        args, answers, command="watch", task_id=args.task_id, cancel_on_interrupt=False
    )

    async def first(client: Client) -> TaskHandle:
        handle = TaskHandle.attach(client, args.task_id)
        await handle.get()
        return handle

    async def body(interrupts: Interrupts) -> int:
        return await follower.run(interrupts, first)

    return _run("watch", args.url, body, by_id=True)


async def _once(url: str, task_id: str, action: Callable[[TaskHandle], Awaitable[int]]) -> int:
    async with tasks_client(url) as client:
        return await action(TaskHandle.attach(client, task_id))


def run_get(args: argparse.Namespace) -> int:
    async def action(handle: TaskHandle) -> int:
        state = await handle.get()
        if args.json:
            dumped: dict[str, Any] = state.model_dump(by_alias=True, mode="json", exclude_none=True)
            sys.stdout.write(json.dumps(dumped, indent=2) + "\n")
        else:
            sys.stdout.write(describe(state) + "\n")
        return EXIT_OK

    async def body(interrupts: Interrupts) -> int:
        return await _once(args.url, args.task_id, action)

    return _run("get", args.url, body, by_id=True)


def run_cancel(args: argparse.Namespace) -> int:
    async def action(handle: TaskHandle) -> int:
        before = await handle.get()
        if before.is_terminal:
            sys.stdout.write(f"{before.status}: the task had already ended; nothing to cancel\n")
            return EXIT_OK if before.status == "cancelled" else EXIT_CHECK_FAILED
        await handle.cancel()
        after = await handle.get()
        sys.stdout.write(f"{after.status}\n")
        return EXIT_OK if after.status == "cancelled" else EXIT_CHECK_FAILED

    async def body(interrupts: Interrupts) -> int:
        return await _once(args.url, args.task_id, action)

    return _run("cancel", args.url, body, by_id=True)
