"""`ask`: a small MCP server built with the official `mcp` Python SDK, for the client's tests.

Tools:
- `whoami()`: the revision and capabilities the client offered (from the handshake).
- `ask_name(wait=0)`: after `wait` seconds, asks the client for a form (`name`, required;
  `age`, default 30) and returns what came back: `{"action": ..., "content": ...}`.
- `grow()`: adds the tool `grown` and tells the client its tool list changed.

Usage: `python3 ask_server.py` (stdio), `python3 ask_server.py sse PORT`,
`python3 ask_server.py streamable-http PORT`.
"""

import json
import sys

import anyio

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

server = MCPServer("ask")


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
    await ctx.session.send_tool_list_changed()
    return "added"


if __name__ == "__main__":
    if len(sys.argv) > 2:
        server.run(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
