// Agent Kanban for opencode (written by `agent-kanban connect`; SPEC §13). opencode has no
// hook commands, so this plugin forwards each tool call to the board before it runs and
// throws to block it: the model reads the message. A gated call runs only on the board's
// own answer: a 2xx whose body is a JSON object signed by the board (X-Kanban-Proof:
// HMAC-SHA256 of the body keyed with the token, as kanban-hook checks it). Anything else
// (no board configured, no answer, a redirect, an error status, no proof or a wrong one,
// a body that is not a JSON object) blocks it, naming the board.
//
// The token goes only where the person put it: the boards of boards.json (written by
// connect, mode 0600). A repository's .env can set any environment, so KANBAN_HOOK_URL
// only picks one of those boards and a KANBAN_TOKEN other than its own is refused.
import { createHmac, timingSafeEqual } from "node:crypto"
import { readFileSync } from "node:fs"
import { homedir, hostname } from "node:os"
import { join } from "node:path"

const HELD_MS = 3630 * 1000 // a person may hold a call for up to an hour
const QUICK_MS = 10 * 1000

// (origin, path prefix, slug) of a board URL (…/boards/<slug>/) or a hook URL
// (…/api/boards/<slug>/hooks/<client>): two URLs name one board when these agree.
function place(url) {
  let parsed
  try { parsed = new URL(url) } catch { throw new Error(`${url} is not a URL`) }
  if (!["http:", "https:"].includes(parsed.protocol)) throw new Error(`${url} is not an http(s) URL`)
  const found = parsed.pathname.match(/^(.*?)\/(?:api\/)?boards\/([-\w]+)(?:\/hooks\/[-\w]+)?\/?$/)
  if (!found) throw new Error(`${url} is not a board URL`)
  return { origin: parsed.origin, prefix: found[1], slug: found[2] }
}

function same(a, b) {
  return a.origin === b.origin && a.prefix === b.prefix && a.slug === b.slug
}

function board() {
  const config = process.env.XDG_CONFIG_HOME || join(homedir(), ".config")
  const path = join(config, "agent-kanban", "boards.json")
  let boards
  try { boards = JSON.parse(readFileSync(path, "utf8")).boards } catch (error) {
    throw new Error(`no board is configured (${path}: ${error.code || "not JSON"}): run agent-kanban connect`)
  }
  if (!Array.isArray(boards) || !boards.length) throw new Error(`${path} lists no boards`)
  let chosen = boards.filter((b) => b && typeof b.url === "string" && typeof b.token === "string")
  const wanted = process.env.KANBAN_HOOK_URL
  if (wanted) {
    const where = place(wanted)
    chosen = chosen.filter((b) => { try { return same(place(b.url), where) } catch { return false } })
    if (!chosen.length) throw new Error(`KANBAN_HOOK_URL is not a configured board, so the token is not sent there (${path} does not list it)`)
  }
  if (!chosen.length) throw new Error(`${path} lists no usable board`)
  const picked = chosen[0]
  if (process.env.KANBAN_TOKEN && process.env.KANBAN_TOKEN !== picked.token) { // an empty one replaces nothing
    throw new Error(`KANBAN_TOKEN is set and is not the token ${path} holds for this board; the environment cannot replace it`)
  }
  if (!picked.token) throw new Error(`no token for this board in ${path}: run agent-kanban connect`)
  const agent = process.env.KANBAN_AGENT ?? (typeof picked.agent === "string" ? picked.agent : "")
  return { url: picked.url, token: picked.token, agent }
}

function hookUrl(url) {
  const { origin, prefix, slug } = place(url)
  return `${origin}${prefix}/api/boards/${slug}/hooks/opencode`
}

function proven(token, body, proof) {
  if (!proof) return false
  const expected = Buffer.from(createHmac("sha256", token).update(body).digest("hex"))
  const given = Buffer.from(proof.trim().toLowerCase())
  return given.length === expected.length && timingSafeEqual(given, expected)
}

async function send(body, ms) {
  let config
  try { config = board() } catch (error) {
    throw new Error(`kanban-hook has no Agent Kanban board to ask (${error.message}), so this tool call is blocked.`)
  }
  const { url, token, agent } = config
  const target = hookUrl(url)
  const headers = { "Content-Type": "application/json", Authorization: `Bearer ${token}`, "X-Kanban-Host": hostname() }
  if (agent) headers["X-Agent"] = agent
  let response, bytes
  try {
    response = await fetch(target, { method: "POST", headers, body: JSON.stringify(body), redirect: "manual", signal: AbortSignal.timeout(ms) })
    bytes = Buffer.from(await response.arrayBuffer())
  } catch (error) {
    throw new Error(`The Agent Kanban board at ${target} could not be reached (${error.cause?.code || error.name}), so this tool call is blocked until it can be.`)
  }
  const refuse = (why) => new Error(`The Agent Kanban board at ${target} gave no verdict (${why}), so this tool call is blocked.`)
  if (response.status < 200 || response.status > 299) throw refuse(`it answered HTTP ${response.status}`)
  if (!response.headers.get("x-kanban-proof")) throw refuse("the answer is not the board's: it carries no X-Kanban-Proof")
  if (!proven(token, bytes, response.headers.get("x-kanban-proof"))) throw refuse("the answer is not the board's: its X-Kanban-Proof does not match")
  let answer
  try { answer = JSON.parse(bytes.toString("utf8")) } catch { answer = undefined }
  if (answer === null || typeof answer !== "object" || Array.isArray(answer)) throw refuse("its answer is not a JSON object")
  return answer
}

async function quietly(body) {
  try { await send(body, QUICK_MS) } catch {} // only a tool call may block
}

export const AgentKanban = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = await send({
      hook_event_name: "tool.execute.before", session_id: input.sessionID, cwd: directory,
      tool_name: input.tool, tool_input: output.args || {}, tool_use_id: input.callID,
    }, HELD_MS)
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
