// The TypeScript SDK 1.x client (2025-11-25) against the content server of
// tests/interop/test_content.py: its tool list must parse (a non-object outputSchema is
// left out for this era), and image, audio and non-object structured results must too.
// Prints one JSON object on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const client = new Client({ name: "ts-legacy-content", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]));
await client.connect(transport);
const tools = (await client.listTools()).tools;
const call = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  return { types: result.content.map((block) => block.type), structuredContent: result.structuredContent };
};
const out = {
  protocolVersion: transport.protocolVersion,
  outputSchemas: Object.fromEntries(tools.map((tool) => [tool.name, tool.outputSchema ?? null])),
  image: Buffer.from((await client.callTool({ name: "image", arguments: {} })).content[0].data, "base64").toString("hex"),
  mixed: await call("mixed", {}),
  full: await call("full", {}),
  shipment: await call("shipment", { pickup: 3 }),
  loose: await call("loose", {}),
  objects: await call("objects", {}),
};
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
