"""Recovery: work nobody holds (its process died, it released it, or a server left it to
workers) is claimed without an id and run again through its tool's executor, for each way a
tool is declared: ``Tasks.tool`` on an MCPServer, ``Tasks.register(run=…)`` for any SDK, and
FastMCP task tools through our FastMCP extension.

"Another process" is a second store handle on the same memory backend: the store is all
processes share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import pytest
from fastmcp import FastMCP
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from mcp_tasks import (
    ANY_OWNER,
    Claimed,
    Lease,
    MemoryBackend,
    MemoryTaskStore,
    NewTask,
    RequestView,
    RequireInput,
    RunnerOptions,
    TaskContext,
    Tasks,
    TaskStatus,
    current_task_context,
    lease_of,
    new_task_id,
)
from mcp_tasks.runtime.runner import INTERRUPTED_ERROR, NO_EXECUTOR_ERROR, tool_work

if TYPE_CHECKING:
    from mcp_tasks.domain.models import TaskRecord

pytestmark = pytest.mark.anyio

TASKS_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
DEAD_LEASE_MS = 100


async def orphan(backend: MemoryBackend, tool: str, arguments: dict[str, Any], **kw: Any) -> str:
    """A task as a process that died mid-run leaves it: created claimed by that process,
    whose lease runs out ``DEAD_LEASE_MS`` later and is never renewed nor released."""
    task_id = new_task_id()
    await MemoryTaskStore(backend=backend).create(
        NewTask(
            task_id=task_id,
            work=tool_work(tool, arguments, task_id=task_id),
            claimed_by="dead-process",
            lease_ms=DEAD_LEASE_MS,
            **kw,
        )
    )
    return task_id


async def finished(store: MemoryTaskStore, task_id: str) -> TaskRecord:
    with anyio.fail_after(15):
        while True:
            record = await store.get(task_id, ANY_OWNER)
            if record.status.is_terminal:
                return record
            await anyio.sleep(0.02)


def text_of(record: TaskRecord) -> str:
    assert record.result is not None
    content = record.result["content"]
    assert isinstance(content, list)
    first = content[0]
    assert isinstance(first, dict)
    return str(first["text"])


def recovering_tasks(backend: MemoryBackend, **runner: Any) -> Tasks:
    """A process on ``backend`` with a short lease that looks for orphaned work often;
    ``runner``: more of its :class:`RunnerOptions`."""
    options = RunnerOptions(lease_ms=2_000, recovery_interval_s=0.05, **runner)
    return Tasks(store=MemoryTaskStore(backend=backend), runner=options)


async def test_an_mcpserver_tool_runs_again_from_the_record_alone() -> None:
    """A ``Tasks.tool`` task left by a dead process is run by another one once the lease
    ran out: its arguments, owner and idempotency key (the task id) come from the record;
    it is claimed at generation 2 and completes once."""
    backend = MemoryBackend()
    task_id = await orphan(backend, "double", {"x": 21}, owner="alice")
    tasks = recovering_tasks(backend)
    mcp: MCPServer[Any] = MCPServer("b", extensions=[tasks.extension()])
    seen: list[tuple[str | None, str | None, int]] = []

    @tasks.tool(mcp, mode="required")
    async def double(x: int, ctx: TaskContext) -> str:
        seen.append((ctx.idempotency_key, ctx.owner, ctx.attempt))
        return str(2 * x)

    async with tasks.running():
        record = await finished(tasks.store, task_id)  # type: ignore[arg-type]
    assert record.status is TaskStatus.COMPLETED
    assert text_of(record) == "42"
    assert record.generation == 2
    assert seen == [(task_id, "alice", 0)]


async def test_a_registered_run_function_is_the_executor() -> None:
    """``Tasks.register(name, run=…)`` (any SDK, e.g. a low-level Server) runs such a task."""
    backend = MemoryBackend()
    task_id = await orphan(backend, "shout", {"word": "hi"})
    tasks = recovering_tasks(backend)

    async def shout(arguments: Any) -> dict[str, Any]:
        context = current_task_context()
        assert context is not None
        assert context.task_id == task_id
        return {"content": [{"type": "text", "text": str(arguments["word"]).upper()}]}

    tasks.register("shout", mode="required", run=shout)
    async with tasks.running():
        record = await finished(tasks.store, task_id)  # type: ignore[arg-type]
    assert text_of(record) == "HI"


async def test_a_fastmcp_task_tool_runs_again_through_the_bound_server() -> None:
    """A FastMCP ``task=True`` tool of the server our extension is bound to is found by
    name when its task is recovered, and run without FastMCP's middleware; its own error is
    a ``completed`` error result, as on its first run. The runner claims the server's task
    tools only (S-CLAIM.4): a task of a tool the server has not, or has without
    ``task=True``, is left alone."""
    backend = MemoryBackend()
    good = await orphan(backend, "triple", {"x": 5})
    bad = await orphan(backend, "explode", {})
    untasked = await orphan(backend, "plain", {})
    tasks = recovering_tasks(backend)
    mcp = FastMCP("f")
    mcp.add_extension(tasks.fastmcp_extension())

    @mcp.tool(task=True)
    async def triple(x: int) -> str:
        context = current_task_context()
        assert context is not None
        assert context.task_id == good
        return str(3 * x)

    @mcp.tool(task=True)
    async def explode() -> str:
        raise ValueError("kaboom")

    @mcp.tool
    async def plain() -> str:
        return "not a task tool"

    assert await tasks.runner.work_types() == {"triple", "explode"}
    async with tasks.running():
        done = await finished(tasks.store, good)  # type: ignore[arg-type]
        failed = await finished(tasks.store, bad)  # type: ignore[arg-type]
        left = await tasks.store.get(untasked, ANY_OWNER)
    assert (left.status, left.generation) == (TaskStatus.WORKING, 1)  # the dead process's
    assert text_of(done) == "15"
    assert failed.status is TaskStatus.COMPLETED
    assert failed.result is not None
    assert failed.result["isError"] is True


async def test_a_task_of_a_tool_declared_without_run_fails_at_once() -> None:
    """A task of a tool this process declares but cannot run again (registered without
    ``run``: only a first-run closure) fails with a fixed message naming no id, and is
    released."""
    backend = MemoryBackend()
    task_id = await orphan(backend, "first-run-only", {})
    tasks = recovering_tasks(backend)
    tasks.register("first-run-only")
    async with tasks.running():
        record = await finished(tasks.store, task_id)  # type: ignore[arg-type]
    assert record.status is TaskStatus.FAILED
    assert record.error == NO_EXECUTOR_ERROR
    assert record.claim is None


async def test_a_task_of_a_tool_this_process_lacks_waits_for_one_that_serves_it() -> None:
    """S-CLAIM.4: a process that does not have a task's tool never claims it (however many
    recovery polls pass); a process that serves the tool runs it."""
    backend = MemoryBackend()
    task_id = await orphan(backend, "elsewhere", {})
    tasks = recovering_tasks(backend)
    async with tasks.running():
        await anyio.sleep(DEAD_LEASE_MS / 1000 + 0.3)  # past the dead lease, a few polls
        record = await tasks.store.get(task_id, ANY_OWNER)
    assert record.status is TaskStatus.WORKING
    assert record.generation == 1  # only the dead process's claim
    serving = recovering_tasks(backend)

    async def elsewhere(arguments: Any) -> str:
        return "ran"

    serving.register("elsewhere", run=elsewhere)
    async with serving.running():
        record = await finished(serving.store, task_id)  # type: ignore[arg-type]
    assert record.status is TaskStatus.COMPLETED
    assert text_of(record) == "ran"


async def test_adopted_bodies_are_bounded_by_max_adopted() -> None:
    """Six orphans, ``max_adopted=2``: never more than two adopted bodies run at once, and
    all six complete."""
    backend = MemoryBackend()
    ids = [await orphan(backend, "hold", {}) for _ in range(6)]
    tasks = recovering_tasks(backend, max_adopted=2)
    running = peak = 0

    async def hold(arguments: Any) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.1)
        running -= 1
        return "ok"

    tasks.register("hold", run=hold)
    async with tasks.running():
        records = [await finished(tasks.store, t) for t in ids]  # type: ignore[arg-type]
    assert all(r.status is TaskStatus.COMPLETED for r in records)
    assert peak == 2


async def test_a_server_that_runs_no_tasks_leaves_them_to_a_worker() -> None:
    """``RunnerOptions(run_tasks=False)`` creates the task unclaimed (generation 0) and runs
    nothing; a worker process (another Tasks on the store) claims and completes it."""
    backend = MemoryBackend()
    server = Tasks(store=MemoryTaskStore(backend=backend), runner=RunnerOptions(run_tasks=False))
    worker = recovering_tasks(backend)
    ran_in: list[str] = []

    async def job(arguments: Any) -> str:
        ran_in.append("worker")
        return "done"

    server.register("job", mode="required")
    worker.register("job", mode="required", run=job)
    view = RequestView(protocol_version="2026-07-28", client_capabilities=TASKS_CAPS)

    async def never() -> Any:
        raise AssertionError("the server must not run the body")

    async with server.running():
        created = await server.engine.handle_tool_call(
            view, name="job", arguments={}, input_responses=None, call_next=never
        )
        record = await server.store.get(created["taskId"], ANY_OWNER)
        assert (record.generation, record.claim) == (0, None)
        async with worker.running():
            done = await finished(worker.store, created["taskId"])  # type: ignore[arg-type]
    assert done.status is TaskStatus.COMPLETED
    assert ran_in == ["worker"]


async def test_a_synchronous_call_asking_for_a_retry_answers_the_bodys_error() -> None:
    """Without a task there is nothing to retry: ``ctx.retry`` in a synchronous call
    answers the JSON-RPC error it carries."""
    tasks = Tasks()
    tasks.register("sync", mode="forbidden", retry_delays_ms=[10])
    view = RequestView(protocol_version="2026-07-28", client_capabilities={})

    async def body() -> Any:
        context = current_task_context()
        assert context is not None
        context.retry("try later", code=-32000, data={"after": 10})

    async with tasks.running():
        with pytest.raises(MCPError) as caught:
            await tasks.engine.handle_tool_call(
                view, name="sync", arguments={}, input_responses=None, call_next=body
            )
    assert (caught.value.code, caught.value.message) == (-32000, "try later")
    assert caught.value.error.data == {"after": 10}


async def test_a_rerun_gets_its_answered_question_from_the_record() -> None:
    """A body asked a question, the client answered, then the process died. The re-run asks
    the same key with the same request: it gets the recorded answer at once, with no new
    input round (the task never goes back to input_required)."""
    backend = MemoryBackend()
    store = MemoryTaskStore(backend=backend)
    task_id = await orphan(backend, "greet", {})
    question = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {}},
        },
    }
    dead = await store.get(task_id, ANY_OWNER)
    await store.put_status(task_id, RequireInput({"name": question}), lease=lease_of(dead))
    await store.update(task_id, None, {"name": {"action": "accept", "content": {"n": "Ada"}}})
    answered = await store.get(task_id, ANY_OWNER)
    tasks = recovering_tasks(backend)
    mcp: MCPServer[Any] = MCPServer("b", extensions=[tasks.extension()])

    @tasks.tool(mcp, mode="required")
    async def greet(ctx: TaskContext) -> str:
        answer = await ctx.elicit("name", "Name?", {"type": "object", "properties": {}})
        content = answer.get("content")
        assert isinstance(content, dict)
        return f"hello {content['n']}"

    async with tasks.running():
        record = await finished(tasks.store, task_id)  # type: ignore[arg-type]
    assert text_of(record) == "hello Ada"
    # One write since the answer: the completion (no new input_required in between).
    assert record.revision == answered.revision + 1


async def test_a_takeover_is_logged_at_info_with_its_tool_and_wait_and_no_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Taking over a dead process's task says so at INFO: the tool's name and how long the
    task went without progress, in the message and in the record's ``extra`` fields
    (``tool``, ``attempt``, ``waited_s``, ``store``); never the task's id."""
    backend = MemoryBackend()
    task_id = await orphan(backend, "double", {"x": 1})
    tasks = recovering_tasks(backend)
    mcp: MCPServer[Any] = MCPServer("b", extensions=[tasks.extension()])

    @tasks.tool(mcp, mode="required")
    async def double(x: int) -> str:
        return str(2 * x)

    with caplog.at_level("INFO", logger="mcp_tasks"):
        async with tasks.running():
            await finished(tasks.store, task_id)  # type: ignore[arg-type]
    (takeover,) = [r for r in caplog.records if r.getMessage().startswith("resuming")]
    assert takeover.levelname == "INFO"
    assert takeover.name == "mcp_tasks.runtime.runner"
    assert "'double'" in takeover.getMessage()
    fields = {key: getattr(takeover, key, None) for key in ("tool", "attempt", "store")}
    assert fields == {"tool": "double", "attempt": 0, "store": "memory"}
    waited: Any = getattr(takeover, "waited_s", None)
    assert isinstance(waited, float)
    assert waited >= DEAD_LEASE_MS / 1000
    assert f"after {waited:.1f} s" in takeover.getMessage()
    assert all(task_id not in r.getMessage() for r in caplog.records if r.levelno >= 20)


async def test_a_rerun_tools_failure_is_logged_by_type_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A re-run body's error text may quote its arguments: above DEBUG the failure names
    the tool and the error's type only; the client still gets the text in its result."""
    backend = MemoryBackend()
    task_id = await orphan(backend, "check", {"card": "4111-SECRET"})
    tasks = recovering_tasks(backend)
    mcp: MCPServer[Any] = MCPServer("b", extensions=[tasks.extension()])

    @tasks.tool(mcp, mode="required")
    async def check(card: str) -> str:
        raise ToolError(f"card {card} declined")

    with caplog.at_level("INFO", logger="mcp_tasks"):
        async with tasks.running():
            record = await finished(tasks.store, task_id)  # type: ignore[arg-type]
    assert "4111-SECRET" in text_of(record)
    (failed,) = [r for r in caplog.records if "failed" in r.getMessage()]
    assert failed.getMessage() == "tool 'check' failed (ToolError)"
    assert all("4111-SECRET" not in r.getMessage() for r in caplog.records if r.levelno >= 20)


async def test_an_interrupted_task_of_a_tool_that_is_not_rerun_fails() -> None:
    """A task of a ``recovery="fail"`` tool left by a dead process fails with "The task
    was interrupted; this tool is not re-run" and its body never runs again; a FastMCP tool
    named in ``fastmcp_extension(not_rerun=…)`` likewise; a re-run tool's orphan still runs
    again."""
    backend = MemoryBackend()
    paid = await orphan(backend, "pay", {})
    fast_paid = await orphan(backend, "fast_pay", {})
    again = await orphan(backend, "count", {})
    tasks = recovering_tasks(backend)
    runs: list[str] = []

    async def record_run(arguments: Any) -> str:
        context = current_task_context()
        assert context is not None
        runs.append(context.task_id)
        return "done"

    tasks.register("pay", mode="required", run=record_run, recovery="fail")
    tasks.register("count", mode="required", run=record_run)
    mcp = FastMCP("f")
    mcp.add_extension(tasks.fastmcp_extension(not_rerun=["fast_pay"]))

    @mcp.tool(task=True)
    async def fast_pay() -> str:
        return await record_run({})

    async with tasks.running():
        records = [await finished(tasks.store, t) for t in (paid, fast_paid, again)]  # type: ignore[arg-type]
    assert [(r.status, r.error) for r in records[:2]] == [
        (TaskStatus.FAILED, INTERRUPTED_ERROR)
    ] * 2
    assert records[2].status is TaskStatus.COMPLETED
    assert runs == [again]


async def test_a_due_retry_of_a_tool_that_is_not_rerun_still_runs() -> None:
    """A retry the body asked for is no interruption: a ``recovery="fail"`` task created
    for workers runs, asks for one retry, and its retry runs and completes (claims at
    generations 1 and 2, attempts 0 and 1)."""
    backend = MemoryBackend()
    task_id = new_task_id()
    await MemoryTaskStore(backend=backend).create(
        NewTask(task_id=task_id, work=tool_work("pay", {}, task_id=task_id, retry_delays_ms=(50,)))
    )
    tasks = recovering_tasks(backend)
    attempts: list[int] = []

    async def pay(arguments: Any) -> str:
        context = current_task_context()
        assert context is not None
        attempts.append(context.attempt)
        if context.attempt == 0:
            context.retry("busy")
        return "paid"

    tasks.register("pay", mode="required", run=pay, retry_delays_ms=[50], recovery="fail")
    async with tasks.running():
        record = await finished(tasks.store, task_id)  # type: ignore[arg-type]
    assert record.status is TaskStatus.COMPLETED
    assert (attempts, record.generation) == ([0, 1], 2)


class ShieldedStore(MemoryTaskStore):
    """The memory store with its claims and releases shielded from cancellation, as the
    MongoDB store runs its driver calls (it never cancels PyMongo). The first claim is in
    flight until its runner stopped; the claims that start after that are counted."""

    def __init__(self, backend: MemoryBackend) -> None:
        super().__init__(backend=backend)
        self.runner: Any = None
        self.claiming = anyio.Event()
        self.claims_after_stop = 0

    async def claim(self, worker_id: str, **kw: Any) -> Claimed | None:
        with anyio.CancelScope(shield=True):
            if not self.runner.running:
                self.claims_after_stop += 1
                # Past this many the loop would claim on forever: end it, failing the test.
                assert self.claims_after_stop < 20, "the stopped runner claims on"
            self.claiming.set()
            while self.runner.running:  # noqa: ASYNC110 (the stop sets no event to wait for)
                await anyio.sleep(0.01)
            return await super().claim(worker_id, **kw)

    async def release(self, lease: Lease) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.lowlevel.checkpoint()
            await super().release(lease)


async def test_a_stopped_runner_claims_nothing_even_where_no_cancellation_reaches_the_store() -> (
    None
):
    """A claim in flight when the runner stops takes a task it can no longer run: the
    runner releases it and claims nothing more, though its store's calls are shielded
    from the stop's cancellation (the recovery loop ends because the runner stopped; a
    cancellation finds no await of it outside the store to land on)."""
    backend = MemoryBackend()
    task_id = new_task_id()
    await MemoryTaskStore(backend=backend).create(
        NewTask(task_id=task_id, work=tool_work("job", {}, task_id=task_id))
    )
    store = ShieldedStore(backend)
    tasks = Tasks(store=store, runner=RunnerOptions(recovery_interval_s=0.05))
    store.runner = tasks.runner

    async def job(arguments: Any) -> str:
        raise AssertionError("a stopped runner runs nothing")

    tasks.register("job", mode="required", run=job)
    with anyio.fail_after(10):
        async with tasks.running():
            await store.claiming.wait()
    record = await store.get(task_id, ANY_OWNER)
    assert (record.status, record.claim, record.generation) == (TaskStatus.WORKING, None, 1)
    assert store.claims_after_stop == 0


def test_recovery_is_rerun_or_fail() -> None:
    """``recovery`` takes "rerun" (the default) or "fail"; anything else is refused."""
    tasks = Tasks(store=MemoryTaskStore())
    assert tasks.register("a").recovery == "rerun"
    with pytest.raises(ValueError, match="recovery"):
        tasks.register("b", recovery="never")
