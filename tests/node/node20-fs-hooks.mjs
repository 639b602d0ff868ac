// Module resolve hook, registered by conformance.mjs on Node < 22 only: the conformance
// suite's import of "fs" gets Node's fs plus a globSync stub (see conformance.mjs).
const FS_WITH_GLOB = `data:text/javascript,${encodeURIComponent(
  [
    'export * from "node:fs";',
    'export { default } from "node:fs";',
    "export function globSync() {",
    '  throw new Error("fs.globSync needs Node 22 (only the tier-check command uses it)");',
    "}",
  ].join("\n"),
)}`;

export async function resolve(specifier, context, nextResolve) {
  const fromSuite = context.parentURL?.includes("/@modelcontextprotocol/conformance/") ?? false;
  if (fromSuite && (specifier === "fs" || specifier === "node:fs")) {
    return { url: FS_WITH_GLOB, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
