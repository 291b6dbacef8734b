"""One request's life from dispatch to its handler's real exit: the cancellation contract.

    scope          RequestScope: the one owner of a request's fate (cancel, the write
                   choke point, the record, the outcome; its Phase)
    runner         runs the handler's task and the watcher's; carries out, never decides
    armed          ArmedWatch: the client watched from the handler's task while it waits,
                   the watcher's task only once something happens; `plain` receives
    watcher        Watcher: reads `receive()` for a disconnect, keeps the stream alive,
                   holds the deadline; reports why it stopped, never acts on the scope
    outcome        RequestRecord (the frozen record observers get), Outcome, SideEffect,
                   ScopeObserver
    unclaimed      Unclaimed: a message-less cancellation in the handler, not yet known
                   to be the server's
    cancel         CancelReason, CancelToken, RequestCancelled
    cancel_log     the `mcp_asgi.cancellation` log records
    work           RunningWork: the handler, its threads and owned resources
    process        ctx.run_process / stream_process; process_group: process groups
    lazy_event     an event made on first wait

Its event-loop fast paths (worker threads, the watcher's waits, the clock, the handler's
task) live in `mcp_asgi._loop`. Imports `mcp_asgi.http` (the reply writer is the scope's
write channel) and `mcp_asgi.protocol`; never the server, input, bus, telemetry, legacy or
the middleware.
Observers (telemetry, the cancellation log) are told through `ScopeObserver`.
"""
