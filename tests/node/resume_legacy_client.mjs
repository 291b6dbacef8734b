// The TypeScript SDK 1.x client resuming after a network cut: it connects (its GET stream
// opens), calls `gated` and prints "progress" once the first progress notification has
// arrived; the test then severs every connection, raises tools/list_changed and lets the
// handler finish. The SDK reconnects both streams by itself with Last-Event-ID. Prints one
// JSON object once the call is answered and the notification has arrived.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.argv[2]);
const client = new Client({ name: "ts-legacy-resume", version: "1.0.0" });
let listChanged = 0;
let changed;
const gotChange = new Promise((resolve) => (changed = resolve));
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  listChanged += 1;
  changed();
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
const progress = [];
const result = await client.callTool({ name: "gated", arguments: {} }, undefined, {
  onprogress: (p) => {
    progress.push(p.progress);
    if (progress.length === 1) console.log("progress");
  },
  timeout: 20000,
});
await gotChange;
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ result: result.content[0].text, progress, listChanged }));
