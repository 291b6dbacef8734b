// The TypeScript SDK 1.x client of the fleet test (tests/fleet): one 2025-era session for
// the whole run, through the load balancer, calling `echo` and `paced` (progress) in a
// loop until the file argv[3] exists. A call cut by a restart (a 503, or the
// server_shutdown error) is retried. Prints one JSON object: every call's attempts.
import { existsSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, stopFile] = process.argv.slice(2);
const client = new Client({ name: "ts-fleet", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  reconnectionOptions: {
    initialReconnectionDelay: 100,
    maxReconnectionDelay: 1000,
    reconnectionDelayGrowFactor: 1.5,
    maxRetries: 20,
  },
});
transport.onerror = () => {}; // a restart cuts the GET stream: the SDK reconnects
await client.connect(transport);

const calls = [];
let progress = 0;
const retryable = new Set(["unavailable", "server_shutdown"]);

function kind(error) {
  if (error?.data?.reason === "server_shutdown" && /Service Unavailable/.test(error?.message)) {
    return "unavailable"; // the draining replica's 503, its body as the SDK reports it
  }
  if (error?.code === -32603 && error?.data?.reason === "server_shutdown") return "server_shutdown";
  if (error instanceof StreamableHTTPError && error.code === 503) return "unavailable";
  if (error?.code === -32001) return "hang"; // the SDK's request timeout
  return `other: ${error?.name}: ${error?.message}`;
}

async function call(what, attempt) {
  const started = Date.now() / 1000;
  const outcomes = [];
  while (outcomes.length < 6) {
    let outcome = "ok";
    try {
      await attempt();
    } catch (error) {
      outcome = kind(error);
    }
    outcomes.push(outcome);
    if (!retryable.has(outcome)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  calls.push({ client: "ts-2025", what, started, ended: Date.now() / 1000, outcomes });
}

const options = { timeout: 20000, onprogress: () => progress++ };
for (let n = 1; !existsSync(stopFile); n++) {
  const [steps, delay] = n % 4 === 0 ? [10, 0.25] : [3, 0.05];
  await call("echo", () => client.callTool({ name: "echo", arguments: { text: `ts-${n}` } }));
  await call(n % 4 === 0 ? "paced-long" : "paced", () =>
    client.callTool({ name: "paced", arguments: { steps, delay } }, undefined, options),
  );
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ calls, progress }));
