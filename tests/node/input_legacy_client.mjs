// The TypeScript SDK 1.x client answering a 2025-era server's requests: it declares
// elicitation, sampling and roots, answers each with its handlers, and calls `ask`, whose
// handler elicits, samples and lists the roots while it runs, and `pinged`, whose handler
// pings it. Prints one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.argv[2]);
const client = new Client(
  { name: "ts-legacy-input", version: "1.0.0" },
  { capabilities: { elicitation: {}, sampling: {}, roots: {} } },
);
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { name: "Ada" } };
});
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  asked.push(request.params.messages[0].content.text);
  return { role: "assistant", content: { type: "text", text: "hello" }, model: "m" };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  asked.push("roots");
  return { roots: [{ uri: "file:///work", name: "work" }] };
});
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);
const result = await client.callTool({ name: "ask", arguments: {} });
const pinged = await client.callTool({ name: "pinged", arguments: {} }); // ping: answered by the SDK
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ asked, result: result.structuredContent, pinged: pinged.structuredContent }));
