// The TypeScript SDK 1.x client against a live server: connect (initialize, 2025-11-25),
// list, call, read, receive progress, abort a call with an AbortController, call again,
// end the session. Prints one JSON object on stdout; tests/interop/test_legacy_node.py
// checks it, and what the server's handler recorded.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const client = new Client({ name: "ts-legacy-interop", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(url);
const errors = [];
client.onerror = (error) => errors.push(String(error));
await client.connect(transport);

const out = {
  protocolVersion: transport.protocolVersion,
  sessionId: transport.sessionId,
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
};
out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
out.added = (await client.callTool({ name: "add", arguments: { a: 2, b: 3 } })).structuredContent;
out.read = (await client.readResource({ uri: "docs://readme" })).contents[0].text;
try {
  await client.readResource({ uri: "docs://nothing" });
} catch (error) {
  out.missingCode = error.code;
}

// progress, then abort: the SDK posts notifications/cancelled and rejects the call
const controller = new AbortController();
out.progress = [];
try {
  await client.callTool({ name: "slow", arguments: {} }, undefined, {
    signal: controller.signal,
    onprogress: (progress) => {
      out.progress.push(progress.progress);
      controller.abort("user gave up");
    },
  });
  out.aborted = false;
} catch (error) {
  out.aborted = true;
}

out.after = (await client.callTool({ name: "add", arguments: { a: 1, b: 1 } })).structuredContent;
await transport.terminateSession();
await client.close();
out.errors = errors;
console.log(JSON.stringify(out));
