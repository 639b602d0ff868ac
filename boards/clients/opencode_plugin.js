// Agent Kanban for opencode (written by `agent-kanban connect`; SPEC §13). opencode has no
// hook commands, so this plugin forwards each tool call to the board before it runs and
// throws to block it: the model reads the message. A gated call runs only on the board's
// own answer: no board configured, no answer, an error status: blocked, naming the board.
import { createHmac } from "node:crypto"
import { readFileSync } from "node:fs"
import { homedir, hostname } from "node:os"
import { join } from "node:path"

const HELD_MS = 3630 * 1000 // a person may hold a call for up to an hour
const QUICK_MS = 10 * 1000

function board() {
  if (process.env.KANBAN_HOOK_URL && process.env.KANBAN_TOKEN) {
    return { url: process.env.KANBAN_HOOK_URL, token: process.env.KANBAN_TOKEN, agent: process.env.KANBAN_AGENT || "" }
  }
  const config = process.env.XDG_CONFIG_HOME || join(homedir(), ".config")
  const boards = JSON.parse(readFileSync(join(config, "agent-kanban", "boards.json"), "utf8")).boards
  if (!boards || !boards.length) throw new Error("no board in boards.json")
  return boards[0]
}

function hookUrl(url) {
  const found = url.match(/^(.*?)\/(?:api\/)?boards\/([-\w]+)\//)
  if (!found) throw new Error(`${url} is not a board URL`)
  return `${found[1]}/api/boards/${found[2]}/hooks/opencode`
}

async function send(body, ms) {
  const { url, token, agent } = board()
  const target = hookUrl(url)
  const headers = { "Content-Type": "application/json", Authorization: `Bearer ${token}`, "X-Kanban-Host": hostname() }
  if (agent) headers["X-Agent"] = agent
  let response, text
  try {
    response = await fetch(target, { method: "POST", headers, body: JSON.stringify(body), redirect: "error", signal: AbortSignal.timeout(ms) })
    text = await response.text()
  } catch (error) {
    throw new Error(`The Agent Kanban board at ${target} could not be reached (${error.cause?.code || error.name}), so this tool call is blocked until it can be.`)
  }
  if (!response.ok) throw new Error(`The Agent Kanban board at ${target} answered HTTP ${response.status}, so this tool call is blocked.`)
  const proof = response.headers.get("x-kanban-proof")
  if (proof && createHmac("sha256", token).update(text).digest("hex") !== proof) {
    throw new Error(`The answer from ${target} is not the board's own, so this tool call is blocked.`)
  }
  return text.trim() ? JSON.parse(text) : {}
}

async function quietly(body) {
  try { await send(body, QUICK_MS) } catch {} // only a tool call may block
}

export const AgentKanban = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = await send({
      hook_event_name: "tool.execute.before", session_id: input.sessionID, cwd: directory,
      tool_name: input.tool, tool_input: output.args || {}, tool_use_id: input.callID,
    }, HELD_MS).catch((error) => { throw error instanceof SyntaxError ? new Error("The board's answer is not JSON, so this tool call is blocked.") : error })
    if (answer.decision === "deny") throw new Error(answer.reason || "Blocked by the Agent Kanban board.")
  },
  "tool.execute.after": async (input) => {
    await quietly({
      hook_event_name: "tool.execute.after", session_id: input.sessionID, cwd: directory,
      tool_name: input.tool, tool_input: input.args || {}, tool_use_id: input.callID,
    })
  },
  event: async ({ event }) => {
    const names = ["session.created", "session.idle", "session.deleted", "session.error"]
    if (!names.includes(event.type)) return
    const id = event.properties?.sessionID || event.properties?.info?.id
    if (id) await quietly({ hook_event_name: event.type, session_id: id, cwd: directory })
  },
})
