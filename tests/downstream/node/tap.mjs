// The reference server, @modelcontextprotocol/server-everything, with a tap: each request it
// receives (method, id, _meta, the names of its HTTP headers) and what its SDK does with each notifications/cancelled (was
// the named request running, did its AbortSignal fire), appended as JSON lines to the file
// named by the third argument. Usage: node tap.mjs stdio|streamableHttp <tap file> [exit-on-eof|stubborn]
// (server-everything itself does not exit when its stdin closes: the client's SIGTERM ends it,
// after the grace the stdio rules give; `exit-on-eof` makes it leave at once, to save time)
import { appendFileSync } from "node:fs";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";

const tap = process.argv[3];
// t: seconds on CLOCK_MONOTONIC (process.hrtime), the clock of Python's time.monotonic()
const now = () => Number(process.hrtime.bigint()) / 1e9;
const note = (record) => appendFileSync(tap, JSON.stringify({ pid: process.pid, t: now(), ...record }) + "\n");

const onrequest = Protocol.prototype._onrequest;
Protocol.prototype._onrequest = function (request, extra) {
  const headers = Object.keys(extra?.requestInfo?.headers ?? {}); // names only (HTTP)
  note({ event: "request", method: request.method, id: request.id, meta: request.params?._meta ?? null, headers });
  return onrequest.call(this, request, extra);
};

const oncancel = Protocol.prototype._oncancel;
Protocol.prototype._oncancel = async function (notification) {
  const t = now();
  const id = notification.params?.requestId;
  const controller = this._requestHandlerAbortControllers.get(id);
  const running = controller !== undefined && !controller.signal.aborted;
  await oncancel.call(this, notification);
  note({ event: "cancelled", id, running, aborted: controller?.signal.aborted ?? false, t });
};

note({ event: "started", transport: process.argv[2] });
if (process.argv[4] === "exit-on-eof") process.stdin.on("end", () => process.exit(0));
// `stubborn`: it ignores SIGTERM as well (and its stdin closing): only SIGKILL ends it
if (process.argv[4] === "stubborn") process.on("SIGTERM", () => note({ event: "sigterm-ignored" }));
await import("@modelcontextprotocol/server-everything/dist/index.js");
