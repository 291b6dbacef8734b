// The TypeScript SDK v2 client (@modelcontextprotocol/client) drives an mcp_asgi stdio
// server (python -m mcp_asgi.stdio): list, call, progress, a call aborted (the client sends
// notifications/cancelled), a cancel naming an id the server never saw, and two calls in
// flight when the client closes the pipe. argv: mode ("auto" or "legacy"), then the
// server's command and arguments. Prints one JSON object on stdout; the environment (the
// probe file the server's `wait` tool writes to) is passed through.
// tests/stdio/test_stdio_ts.py checks it.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { existsSync, readFileSync } from "node:fs";

const [mode, command, ...args] = process.argv.slice(2);
const probe = process.env.MCP_STDIO_PROBE;
const lines = () => (existsSync(probe) ? readFileSync(probe, "utf8").split("\n").filter(Boolean) : []);
const until = async (check) => {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
};

const client = new Client({ name: "ts-stdio", version: "1.0.0" }, { versionNegotiation: { mode } });
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" }));
const out = { protocolVersion: client.getNegotiatedProtocolVersion?.() ?? null };
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echo = (await client.callTool({ name: "echo", arguments: { text: "hi" } })).content;
const progress = [];
out.count = (
  await client.callTool({ name: "count", arguments: { n: 3 } }, { onprogress: (p) => progress.push(p.progress) })
).content;
out.progress = progress;

const aborter = new AbortController();
const aborted = client.callTool({ name: "wait", arguments: { label: "aborted" } }, { signal: aborter.signal });
await until(() => lines().includes("started aborted"));
aborter.abort("the test aborts it");
out.abortError = await aborted.then(() => null, (e) => String(e?.name ?? e));
await until(() => lines().some((l) => l.startsWith("cancelled aborted")));

await client.notification({ method: "notifications/cancelled", params: { requestId: 424242 } });
out.after = (await client.callTool({ name: "echo", arguments: { text: "after" } })).content;

for (const label of ["p", "q"]) {
  client.callTool({ name: "wait", arguments: { label } }).catch(() => {});
}
await until(() => lines().includes("started p") && lines().includes("started q"));
await client.close(); // closes the server's stdin
await until(() => lines().filter((l) => l.startsWith("cancelled")).length === 3);
out.probe = lines();
console.log(JSON.stringify(out));
