// The TypeScript SDK v2 client (@modelcontextprotocol/client, pinned to 2026-07-28) reads
// back every kind of content over a live server: it lists the tools (their schemas, titles,
// icons, _meta as the client parsed them), calls each tool, reads the resources and gets
// the prompt. Binary data is decoded from base64 and printed as hex, so the Python side
// can compare it with the bytes the handlers returned. Prints one JSON object on stdout;
// tests/interop/test_content.py checks it.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = new URL(process.argv[2]);
const client = new Client(
  { name: "ts-content-interop", version: "1.0.0" },
  { versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
await client.connect(new StreamableHTTPClientTransport(url));

const hex = (base64) => Buffer.from(base64, "base64").toString("hex");

function block(item) {
  switch (item.type) {
    case "image":
    case "audio":
      return { type: item.type, mimeType: item.mimeType, hex: hex(item.data), annotations: item.annotations };
    case "resource":
      return {
        type: "resource",
        uri: item.resource.uri,
        mimeType: item.resource.mimeType,
        text: item.resource.text,
        hex: item.resource.blob === undefined ? undefined : hex(item.resource.blob),
      };
    default:
      return item;
  }
}

const out = { protocolVersion: client.getNegotiatedProtocolVersion?.() ?? null, tools: {}, calls: {} };
for (const tool of (await client.listTools()).tools) {
  out.tools[tool.name] = tool;
}
for (const name of ["image", "audio", "mixed", "full", "shipment", "loose", "objects"]) {
  const args = name === "shipment" ? { pickup: 3 } : {};
  const result = await client.callTool({ name, arguments: args });
  out.calls[name] = {
    content: result.content.map(block),
    structuredContent: result.structuredContent,
    isError: result.isError ?? false,
    meta: result._meta,
  };
}
out.contents = (await client.readResource({ uri: "media://album" })).contents.map((item) => ({
  uri: item.uri,
  mimeType: item.mimeType,
  text: item.text,
  hex: item.blob === undefined ? undefined : hex(item.blob),
}));
out.prompt = (await client.getPrompt({ name: "look", arguments: {} })).messages.map((m) => ({
  role: m.role,
  content: block(m.content),
}));
await client.close();
console.log(JSON.stringify(out));
