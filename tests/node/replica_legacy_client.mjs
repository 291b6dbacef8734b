// The TypeScript SDK 1.x client answering an elicitation on another replica after a cut: it
// declares elicitation and calls `ask`; when the server's elicitation/create arrives it
// prints "asked" and waits for a line on stdin, while the test severs its connections and
// points the proxy at the second replica. Its answer is then POSTed to that replica, and
// the call's stream, resumed there with Last-Event-ID, brings the result. Prints one JSON
// object.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.argv[2]);
const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const client = new Client(
  { name: "ts-legacy-replicas", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async () => {
  console.log("asked");
  await input.next(); // the test has cut the connections and switched replicas
  return { action: "accept", content: {} };
});
const transport = new StreamableHTTPClientTransport(url, {
  reconnectionOptions: {
    initialReconnectionDelay: 100,
    maxReconnectionDelay: 1000,
    reconnectionDelayGrowFactor: 1.5,
    maxRetries: 10,
  },
});
transport.onerror = () => {}; // the cut is expected: the SDK reports it, then reconnects
await client.connect(transport);
const result = await client.callTool({ name: "ask", arguments: {} }, undefined, { timeout: 20000 });
await transport.terminateSession();
await client.close();
process.stdin.destroy();
console.log(JSON.stringify({ result: result.structuredContent }));
