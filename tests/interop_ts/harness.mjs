// The official TypeScript tasks client, connected to one MCP server as its README says:
// an SDK `Client` pinned to 2026-07-28, and an ext-tasks session over it. A 2026-07-28
// tasks session needs a raw request path from its host (`rawDispatch`: the SDK Client
// refuses a `resultType: "task"` answer to tools/call); here that is a second SDK
// Streamable HTTP transport that matches answers to requests by id, and records what it
// sent so that a scenario can also say what went over the wire.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionEndpointId,
  createTaskSessionFromClient,
} from "@modelcontextprotocol/ext-tasks/client";

export const PROTOCOL_VERSION = "2026-07-28";
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
export const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";

const clientInfo = { name: "mcp-tasks-interop-ts", version: "1.0.0" };
// The extension is declared on the Client too: its subscriptions/listen asks for taskIds.
const clientCapabilities = { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } };

/** One server's identity for serialized task references: the same in every process. */
export function endpointIdOf(url) {
  return createTaskSessionEndpointId("mcp-tasks-interop", { url });
}

/**
 * A connected client and tasks session. `onInputRequest` answers input requests;
 * `holdPolls()` makes every later tasks/get wait until the client gives it up (a poll the
 * client abandons when a notification arrives first), so that a scenario can show a task
 * settled by notifications alone. `notifications` collects every notification the session
 * was offered; `sent` every raw request, in order.
 */
export async function connect(url, { onInputRequest } = {}) {
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const notifications = [];
  // The session's adapter calls the fallback handler it found before its own.
  client.fallbackNotificationHandler = async (notification) => {
    notifications.push(notification);
  };

  const raw = new StreamableHTTPClientTransport(new URL(url));
  const waiting = new Map();
  raw.onmessage = (message) => {
    const answer = waiting.get(message.id);
    if (answer !== undefined) {
      waiting.delete(message.id);
      answer(message);
    }
  };
  await raw.start();
  const sent = [];
  let nextId = 0;
  let pollsHeld = false;
  const rawDispatch = async (request, options = {}) => {
    if (pollsHeld && request.method === "tasks/get") await heldUntilAborted(options.signal);
    const id = `raw-${++nextId}`;
    sent.push(request);
    const answered = new Promise((resolve) => waiting.set(id, resolve));
    await raw.send({ jsonrpc: "2.0", id, ...request }, { requestSignal: options.signal });
    const message = await answered;
    return "error" in message
      ? { kind: "error", error: message.error }
      : { kind: "result", result: message.result };
  };

  const session = createTaskSessionFromClient(client, {
    endpointId: await endpointIdOf(url),
    rawDispatch,
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo, clientCapabilities },
    onInputRequest,
  });
  return {
    client,
    session,
    sent,
    notifications,
    holdPolls() {
      pollsHeld = true;
    },
    async close() {
      await session.close();
      await client.close();
      await raw.close();
    },
  };
}

// A held poll goes out after a minute at most: a scenario that waits for a notification
// that never comes then fails on what the poll brought, not on a hang.
const HELD_AT_MOST_MS = 60_000;

function heldUntilAborted(signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, HELD_AT_MOST_MS);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** The text of a CallToolResult's first content block. */
export function textOf(result) {
  return result.content[0].text;
}
