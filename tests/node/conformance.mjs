// The MCP conformance suite's command line (`node conformance.mjs server --url … --scenario …`),
// run from this package's pinned @modelcontextprotocol/conformance.
//
// Its 0.1.16 build imports `globSync` from "fs" at load time, which Node 22 has and Node 20 (on
// the CI machine) does not, so on Node 20 it dies before parsing its arguments. Only its
// `tier-check` command calls globSync; the server scenarios never do. On a Node without it, a
// resolve hook (node20-fs-hooks.mjs) hands the suite's bundle an "fs" that adds a globSync that
// throws; everything else is Node's own fs. On Node 22+ nothing is changed.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register("./node20-fs-hooks.mjs", import.meta.url);
}
await import("@modelcontextprotocol/conformance/dist/index.js");
