"""`ask`: a small MCP server built with the official `mcp` Python SDK, for the client's tests.

Tools:
- `whoami()`: the revision and capabilities the client offered (from the handshake).
- `ask_name(wait=0)`: after `wait` seconds, asks the client for a form (`name`, required;
  `age`, default 30) and returns what came back: `{"action": ..., "content": ...}`.
- `trace()`: the W3C trace context the client sent in the request's `_meta` (SEP-414).
- `grow()`: adds the tool `grown` and tells the client its tool list changed.

Usage: `python3 ask_server.py` (stdio), `python3 ask_server.py sse PORT`,
`python3 ask_server.py streamable-http PORT`; with `--modern` it refuses `initialize`.
"""

import json
import sys

import anyio

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types.jsonrpc import METHOD_NOT_FOUND

# `--modern`: refuse `initialize`, so a client speaks the 2026-07-28 revision (`server/discover`,
# change notifications only on `subscriptions/listen` streams).
MODERN = "--modern" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--modern"]


async def refuse_initialize(ctx, call_next):
    if ctx.method == "initialize":
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="initialize")
    return await call_next(ctx)


server = MCPServer("ask", middleware=[refuse_initialize] if MODERN else None)


@server.tool()
async def whoami(ctx: Context) -> str:
    """What the client said about itself."""
    params = ctx.session.client_params
    return json.dumps(
        {
            "protocol_version": ctx.session.protocol_version,
            "client": params.client_info.name if params else None,
            "elicitation": bool(params and params.capabilities.elicitation is not None),
        }
    )


@server.tool()
async def trace(ctx: Context) -> str:
    """The trace context the client sent with this request (`_meta.traceparent`)."""
    meta = ctx.request_context.meta or {}
    return json.dumps({"traceparent": meta.get("traceparent"), "tracestate": meta.get("tracestate")})


@server.tool()
async def ask_name(ctx: Context, wait: float = 0) -> str:
    """Ask the person for their name (after `wait` seconds)."""
    await anyio.sleep(wait)
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "default": 30},
            "name": {"type": "string", "description": "Your name"},
        },
        "required": ["name"],
    }
    result = await ctx.session.elicit_form("Who is there?", schema, related_request_id=ctx.request_id)
    return json.dumps({"action": result.action, "content": result.content})


def grown() -> str:
    """A tool that appeared after `grow`."""
    return "grown"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `grown` and tell the client."""
    server.add_tool(grown)
    await ctx.session.send_tool_list_changed()  # sessions that began with `initialize`
    await ctx.notify_tools_changed()  # `subscriptions/listen` streams
    return "added"


if __name__ == "__main__":
    if len(ARGS) > 1:
        server.run(ARGS[0], host="127.0.0.1", port=int(ARGS[1]))
    else:
        server.run()
