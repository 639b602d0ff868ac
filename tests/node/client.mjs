// The official TypeScript SDK's client (@modelcontextprotocol/sdk) against the board's MCP server.
//
//   KANBAN_MCP_URL=http://127.0.0.1:PORT/mcp/SLUG/ KANBAN_MCP_TOKEN=… KANBAN_MCP_OTHER_TOKEN=… \
//     node client.mjs main|long [SECONDS]
//
// It prints one JSON summary on stdout (what it saw, step by step) and exits 0 even when a step
// failed: tests/agents/test_mcp_node.py asserts on the summary. A step that threw is recorded as
// {"ok": false, "error": {name, code, message}}.
//
// main: list the tools; call TaskCreate, TaskList, TaskGet, TaskClaim and TaskUpdate through a
//   client whose JSON Schema validator counts what the SDK hands it (the SDK's own Ajv does the
//   validating); prove the SDK refuses structured content that breaks the output schema (a fetch
//   that corrupts one answer); refusals (a missing task, invalid input: tool errors; an unknown
//   tool: a protocol error); then three TaskWatch calls at once:
//   - "outlasts": a task nobody changes, timeoutSeconds 8, request timeout 3 s reset on
//     progress: the server's progress keeps it alive until it answers timedOut: true;
//   - "ended": a task another agent (a second client) claims and completes after 1.5 s;
//   - "noProgress": no onprogress (so no progressToken), timeoutSeconds 5, request timeout 2 s:
//     the SDK gives up with its own timeout error (-32001), as any client without progress does.
// It also notes the Content-Type of each answer to the main client's requests: only a TaskWatch
// that carries a progressToken is answered as a stream (text/event-stream).
// long: the SDK's default request timeout (60 s) and a TaskWatch of SECONDS (past those 60 s),
//   reset on progress.
import { isDeepStrictEqual } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

const mode = process.argv[2] ?? "main";
const url = new URL(required("KANBAN_MCP_URL"));
const token = required("KANBAN_MCP_TOKEN");

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

const started = performance.now();
const now = () => Math.round(performance.now() - started);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function describe(error) {
  return { name: error?.constructor?.name ?? typeof error, code: error?.code, message: String(error?.message ?? error) };
}

async function step(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error: describe(error) };
  }
}

/** The SDK's default validator (Ajv), counting the schemas it compiles and the answers it checks. */
class CountingValidator {
  constructor() {
    this.inner = new AjvJsonSchemaValidator();
    this.compiled = 0;
    this.checked = 0;
    this.invalid = [];
  }

  getValidator(schema) {
    this.compiled += 1;
    const validate = this.inner.getValidator(schema);
    return (input) => {
      this.checked += 1;
      const result = validate(input);
      if (!result.valid) this.invalid.push(result.errorMessage);
      return result;
    };
  }
}

async function connect(bearer, { validator, fetch } = {}) {
  const client = new Client({ name: "kanban-node-tests", version: "1.0.0" }, { jsonSchemaValidator: validator });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
    fetch,
  });
  await client.connect(transport);
  return { client, transport };
}

/** What a tool result carries: its structured content, and whether its text is the same JSON. */
function answer(result) {
  const text = result.content?.length === 1 && result.content[0].type === "text" ? result.content[0].text : null;
  let textIsStructured = false;
  try {
    textIsStructured = text !== null && isDeepStrictEqual(JSON.parse(text), result.structuredContent);
  } catch {
    textIsStructured = false;
  }
  const outcome = { isError: result.isError ?? false, structured: result.structuredContent ?? null, textIsStructured };
  if (outcome.isError) {
    try {
      outcome.text = JSON.parse(text); // a refusal's {"error": {...}}
    } catch {
      outcome.text = text;
    }
  }
  return outcome;
}

/** One tool call through ``client``; how many answers the validator checked during it. */
async function call(client, validator, name, args, options) {
  const before = validator ? validator.checked : 0;
  const outcome = await step(async () => answer(await client.callTool({ name, arguments: args }, undefined, options)));
  if (validator) outcome.validated = validator.checked - before;
  return { tool: name, ...outcome };
}

/** A TaskWatch with the given request options; progress notifications recorded if asked. */
async function watch(client, args, options, { progress = true } = {}) {
  const notes = [];
  const begun = performance.now();
  const requestOptions = { ...options };
  if (progress) requestOptions.onprogress = (p) => notes.push({ ...p, atMs: Math.round(performance.now() - begun) });
  const outcome = await step(async () => answer(await client.callTool({ name: "TaskWatch", arguments: args }, undefined, requestOptions)));
  return { ...outcome, elapsedMs: Math.round(performance.now() - begun), progress: notes };
}

/** A fetch that notes, for each JSON-RPC request posted, the Content-Type of its answer. */
function recordingFetch(seen) {
  return async (input, init) => {
    const response = await fetch(input, init);
    let request = null;
    try {
      request = typeof init?.body === "string" ? JSON.parse(init.body) : null;
    } catch {
      request = null;
    }
    if (request?.method) {
      seen.push({
        method: request.method,
        tool: request.params?.name ?? null,
        progressToken: request.params?._meta?.progressToken !== undefined,
        status: response.status,
        contentType: response.headers.get("content-type"),
      });
    }
    return response;
  };
}

async function main() {
  const summary = { mode, defaultRequestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MSEC };
  const validator = new CountingValidator();
  summary.answers = [];
  const { client, transport } = await connect(token, { validator, fetch: recordingFetch(summary.answers) });
  summary.server = client.getServerVersion();
  summary.capabilities = client.getServerCapabilities();
  summary.protocolVersion = transport.protocolVersion ?? null;
  summary.sessionId = transport.sessionId ?? null;

  const listed = await client.listTools();
  summary.tools = listed.tools.map((t) => ({
    name: t.name,
    title: t.title ?? null,
    annotations: t.annotations ?? null,
    inputSchema: t.inputSchema,
    outputSchema: t.outputSchema ?? null,
  }));
  summary.validatorsCompiled = validator.compiled;

  const calls = [];
  const create = async (subject) => {
    const made = await call(client, validator, "TaskCreate", { subject });
    calls.push(made);
    return made.ok ? made.value.structured.task.id : null;
  };
  const quiet = await create("Nobody touches this one");
  const finished = await create("Bob finishes this one");
  const worked = await create("Alice works on this one");
  const outlier = await create("Watched without progress");
  calls.push(await call(client, validator, "TaskList", {}));
  calls.push(await call(client, validator, "TaskGet", { taskId: quiet }));
  calls.push(await call(client, validator, "TaskClaim", { taskId: worked }));
  calls.push(
    await call(client, validator, "TaskUpdate", {
      taskId: worked,
      activeForm: "Checking the SDK's validation",
      notes: "Called from the TypeScript SDK",
    }),
  );
  summary.calls = calls;
  summary.validatorsChecked = validator.checked;
  summary.invalidAnswers = [...validator.invalid];

  // Refusals: a tool error (isError: true) the client reads; an unknown tool, a protocol error.
  summary.refusals = {
    missing: await call(client, null, "TaskGet", { taskId: "999" }),
    invalid: await call(client, null, "TaskCreate", { subject: "x", colour: "red" }),
    unknownTool: await call(client, null, "Nope", {}),
  };

  // The same validation refuses an answer that breaks the schema: a fetch that rewrites the
  // task's status of a TaskGet answer into a value outside the schema's enum.
  let corrupt = false;
  const corrupting = async (input, init) => {
    const response = await fetch(input, init);
    const type = response.headers.get("content-type") ?? "";
    if (!corrupt || !type.includes("application/json")) return response;
    const body = await response.json();
    if (body?.result?.structuredContent?.task) body.result.structuredContent.task.status = "teleported";
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    return new Response(JSON.stringify(body), { status: response.status, headers });
  };
  const tampered = await connect(token, { fetch: corrupting });
  await tampered.client.listTools();
  const honest = await call(tampered.client, null, "TaskGet", { taskId: quiet });
  corrupt = true;
  const corrupted = await call(tampered.client, null, "TaskGet", { taskId: quiet });
  corrupt = false;
  summary.corruptAnswer = { honest, corrupted };
  await tampered.client.close();

  // Three watches at once (see the top of this file).
  const bob = await connect(required("KANBAN_MCP_OTHER_TOKEN"));
  const change = (async () => {
    await sleep(1500);
    const claimed = await call(bob.client, null, "TaskClaim", { taskId: finished });
    const done = await call(bob.client, null, "TaskUpdate", { taskId: finished, status: "completed", result: "Done by bob" });
    return { claimed, done, atMs: now() };
  })();
  const [outlasts, ended, noProgress, changed] = await Promise.all([
    watch(client, { taskId: quiet, timeoutSeconds: 8 }, { timeout: 3000, resetTimeoutOnProgress: true }),
    watch(client, { taskId: finished, timeoutSeconds: 30 }, { timeout: 3000, resetTimeoutOnProgress: true }),
    watch(client, { taskId: outlier, timeoutSeconds: 5 }, { timeout: 2000 }, { progress: false }),
    change,
  ]);
  summary.watches = { outlasts, ended, noProgress, change: changed };
  await bob.client.close();
  await client.close();
  return summary;
}

async function long() {
  const seconds = Number(process.argv[3]);
  if (!(seconds > 0)) throw new Error("long: give the watch's seconds");
  const summary = { mode, defaultRequestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MSEC };
  const { client } = await connect(token);
  await client.listTools();
  const made = await client.callTool({ name: "TaskCreate", arguments: { subject: `Watched for ${seconds} s` } });
  // No `timeout`: the SDK's default (60 s), reset by each progress notification.
  summary.watch = await watch(client, { taskId: made.structuredContent.task.id, timeoutSeconds: seconds }, { resetTimeoutOnProgress: true });
  await client.close();
  return summary;
}

const modes = { main, long };
if (!(mode in modes)) throw new Error(`unknown mode ${mode}: ${Object.keys(modes).join(", ")}`);
let summary;
try {
  summary = await modes[mode]();
} catch (error) {
  summary = { mode, crashed: describe(error), stack: error?.stack ?? null };
}
summary.elapsedMs = now();
process.stdout.write(`${JSON.stringify(summary)}\n`);
