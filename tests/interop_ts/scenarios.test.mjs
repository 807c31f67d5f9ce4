// The official TypeScript tasks client (@modelcontextprotocol/ext-tasks over
// @modelcontextprotocol/client) against our conformance fixture server (conformance/server.py).
// Each scenario asserts what the client's own API returns.
//
//     MCP_TASKS_INTEROP_URL=http://127.0.0.1:PORT/mcp node --test scenarios.test.mjs
//
// test_interop_ts.py starts the fixture on each Store and runs this file against it.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import {
  JsonRpcResponseError,
  TaskCancelledError,
  TaskFailedError,
  resultFromTaskOutcome,
} from "@modelcontextprotocol/ext-tasks/client";
import { SUBSCRIPTION_ID, connect, endpointIdOf, textOf } from "./harness.mjs";

const URL = process.env.MCP_TASKS_INTEROP_URL;
assert.ok(URL, "set MCP_TASKS_INTEROP_URL to the fixture server's /mcp URL");
// Every scenario ends well within this; a hang fails instead of stalling the run.
const BOUND = { timeout: 60_000 };

/** An id shaped like the server's own (32 random bytes, base64url) that it never issued. */
const unknownTaskId = () => randomBytes(32).toString("base64url");

/** Waits until `check()` is true, looking every 100 ms; fails after 20 s. */
async function eventually(check, withinMs = 20_000) {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function withClient(options, body) {
  const connected = await connect(URL, options);
  try {
    return await body(connected);
  } finally {
    await connected.close();
  }
}

test("a plain tool answers at once, as a completed CallToolResult", BOUND, () =>
  withClient({}, async ({ session }) => {
    const execution = await session.callTool("greet", { name: "Ada" });
    assert.equal(execution.kind, "immediate");
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "completed");
    assert.equal(textOf(resultFromTaskOutcome(outcome)), "Hello, Ada!");
  }),
);

test("a task completes with the tool's result, through the client's own decoding", BOUND, () =>
  withClient({}, async ({ session }) => {
    const execution = await session.callTool("slow_compute", { seconds: 0.5, label: "sum" });
    assert.equal(execution.kind, "task");
    const { outcome, lastTask } = await execution.settle();
    assert.equal(outcome.status, "completed", `the client saw ${outcome.error?.message}`);
    assert.equal(outcome.result.resultType, "complete");
    assert.equal(textOf(outcome.result), "Computed sum after 0.5s");
    assert.equal(lastTask.status, "completed");

    const controller = session.task(execution.handle.taskId);
    assert.equal((await controller.snapshot()).status, "completed");
    const again = await controller.result();
    assert.equal(textOf(resultFromTaskOutcome(again)), "Computed sum after 0.5s");
  }),
);

test("a tool error completes the task with an isError result", BOUND, () =>
  withClient({}, async ({ session }) => {
    const execution = await session.callTool("failing_job", {});
    assert.equal(execution.kind, "task");
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "completed", `the client saw ${outcome.error?.message}`);
    assert.equal(outcome.result.isError, true);
    assert.match(textOf(outcome.result), /The job failed/);
  }),
);

test("a protocol error fails the task with its JSON-RPC error", BOUND, () =>
  withClient({}, async ({ session }) => {
    const execution = await session.callTool("protocol_error_job", {});
    const { outcome, lastTask } = await execution.settle();
    assert.equal(outcome.status, "failed");
    assert.ok(outcome.error instanceof TaskFailedError);
    assert.equal(outcome.error.code, -32603);
    assert.equal(outcome.error.message, "The job hit an internal error");
    assert.equal(lastTask.status, "failed");
    assert.throws(() => resultFromTaskOutcome(outcome), TaskFailedError);
  }),
);

test("an input round: the task asks, the handler answers by tasks/update", BOUND, async () => {
  const asked = [];
  const onInputRequest = async (request, context) => {
    asked.push({ request, context });
    return { action: "accept", content: { confirm: true } };
  };
  await withClient({ onInputRequest }, async ({ session }) => {
    const execution = await session.callTool("confirm_delete", { filename: "notes.txt" });
    assert.equal(execution.kind, "task");
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "completed", `the client saw ${outcome.error?.message}`);
    assert.equal(textOf(outcome.result), "Deleted notes.txt");
    assert.equal(asked.length, 1);
    const [{ request, context }] = asked;
    assert.equal(request.kind, "elicitation");
    assert.equal(request.params.message, "Delete notes.txt?");
    assert.deepEqual(
      [context.scope, context.delivery, context.inputId, context.taskId],
      ["task", "task-update", "confirm", execution.handle.taskId],
    );
  });
});

test("several inputs answered in one tasks/update", BOUND, async () => {
  const asked = [];
  const onInputRequest = async (request, context) => {
    asked.push(context.inputId);
    return { action: "accept", content: { name: context.inputId } };
  };
  await withClient({ onInputRequest }, async ({ session, sent }) => {
    const execution = await session.callTool("multi_input", {});
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "completed", `the client saw ${outcome.error?.message}`);
    assert.equal(textOf(outcome.result), "Got 2 answers");
    assert.deepEqual(asked.sort(), ["first", "second"]);
    const updates = sent.filter((request) => request.method === "tasks/update");
    assert.equal(updates.length, 1);
    assert.deepEqual(Object.keys(updates[0].params.inputResponses).sort(), ["first", "second"]);
  });
});

test("an input round before the task exists, then the task", BOUND, async () => {
  const asked = [];
  const onInputRequest = async (request, context) => {
    asked.push({ request, context });
    return { action: "accept", content: { name: "Alice" } };
  };
  await withClient({ onInputRequest }, async ({ session }) => {
    const execution = await session.callTool("test_tool_with_task", {});
    assert.equal(execution.kind, "task");
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, "completed", `the client saw ${outcome.error?.message}`);
    assert.equal(textOf(outcome.result), "Hello, Alice!");
    assert.equal(asked.length, 1);
    const [{ request, context }] = asked;
    assert.equal(request.params.message, "What is your name?");
    assert.deepEqual(
      [context.scope, context.delivery, context.inputId],
      ["request", "request-retry", "name"],
    );
  });
});

test("cancel: the client's cancel ends the task cancelled on the server", BOUND, () =>
  withClient({}, async ({ session }) => {
    const execution = await session.callTool("slow_compute", { seconds: 60 });
    assert.equal(execution.kind, "task");
    await execution.cancel();
    const outcome = await execution.result();
    assert.equal(outcome.status, "cancelled");
    assert.throws(() => resultFromTaskOutcome(outcome), TaskCancelledError);
    const seen = await session.task(execution.handle.taskId).snapshot();
    assert.equal(seen.status, "cancelled");
  }),
);

test("a task handed off by one process is resumed and settled by another", BOUND, async () => {
  const folder = await mkdtemp(join(tmpdir(), "mcp-tasks-interop-"));
  const referenceFile = join(folder, "reference.json");
  let reference;
  await withClient({}, async ({ session }) => {
    const execution = await session.callTool("slow_compute", { seconds: 1.5, label: "later" });
    assert.equal(execution.kind, "task");
    await execution.handoff(async (serialized) => {
      reference = serialized;
      await writeFile(referenceFile, JSON.stringify(serialized));
    });
    // ext-tasks 0.2.2: a session closed while a handed-off execution is still in its
    // books cancels the task (docs/client.md, "Interoperability"); once the execution's
    // own result has settled (rejected: it was detached), closing leaves the task alone.
    await execution.result().catch(() => {});
  });
  assert.equal(reference.endpointId, await endpointIdOf(URL));

  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(import.meta.dirname, "resume.mjs"), URL, referenceFile],
    { timeout: BOUND.timeout },
  );
  const resumed = JSON.parse(stdout);
  assert.equal(resumed.kind, "task");
  assert.equal(resumed.taskId, reference.taskId);
  assert.equal(resumed.status, "completed");
  assert.equal(resumed.lastStatus, "completed");
  assert.equal(textOf(resumed.result), "Computed later after 1.5s");
});

test("closing a session right after handoff() cancels the task: the client's tasks/cancel", BOUND, async () => {
  // What docs/client.md warns about: the cancel is the client's own request, and the server
  // does as asked. The pinned client versions make this stable.
  await withClient({}, async ({ session, sent }) => {
    const execution = await session.callTool("slow_compute", { seconds: 60 });
    const taskId = execution.handle.taskId;
    await execution.handoff(() => {});
    await session.close();
    // The client sends its cancel without waiting for it: look until the task has ended.
    await withClient({}, async (other) => {
      const controller = other.session.task(taskId);
      await eventually(async () => (await controller.snapshot()).status === "cancelled");
    });
    const cancels = sent.filter((request) => request.method === "tasks/cancel");
    assert.deepEqual(
      cancels.map((request) => request.params.taskId),
      [taskId],
    );
  });
});

test("notifications/tasks on subscriptions/listen settle a task", BOUND, () =>
  withClient({}, async ({ client, session, notifications, holdPolls }) => {
    const execution = await session.callTool("slow_compute", { seconds: 1.5, label: "heard" });
    const taskId = execution.handle.taskId;
    // From here on every poll waits until a notification makes the client drop it.
    holdPolls();
    const subscription = await client.listen({ taskIds: [taskId] });
    try {
      const { outcome, lastTask } = await execution.settle();
      assert.equal(outcome.status, "completed", `the client saw ${outcome.error?.message}`);
      assert.equal(textOf(outcome.result), "Computed heard after 1.5s");
      // The settling state is the one a notification brought (stamped with the listen's id).
      assert.equal(typeof lastTask.raw._meta?.[SUBSCRIPTION_ID], "string");
      const heard = notifications.filter(
        (note) => note.method === "notifications/tasks" && note.params.taskId === taskId,
      );
      assert.equal(heard.at(-1).params.status, "completed");
    } finally {
      await subscription.close();
    }
  }),
);

test("an unknown task id is a -32602 error, for reads, cancels and resumes alike", BOUND, () =>
  withClient({}, async ({ session }) => {
    const controller = session.task(unknownTaskId());
    for (const attempt of [() => controller.snapshot(), () => controller.cancel()]) {
      await assert.rejects(attempt, (error) => {
        assert.ok(error instanceof JsonRpcResponseError);
        assert.equal(error.code, -32602);
        return true;
      });
    }
    const foreign = {
      endpointId: await endpointIdOf(URL),
      generation: "v2",
      taskId: unknownTaskId(),
      originalOperation: "tools/call",
    };
    await assert.rejects(session.resumeTask(foreign), (error) => {
      assert.ok(error instanceof JsonRpcResponseError);
      assert.equal(error.code, -32602);
      return true;
    });
  }),
);
