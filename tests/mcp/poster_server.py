"""`poster`: a tiny MCP server built with the official `mcp` Python SDK, shaped like a Slack MCP
server's send-message tools, for the tests of the external-channel guard
(`mcp_servers.<name>.slack_posting_tools`). It posts nothing anywhere: each call it receives
is appended as one JSON line to the file the `POSTER_LOG` environment variable names, so a
test can tell exactly which calls reached it.

Tools:
- `post_message(channel_id, text)`: Slack's `chat.postMessage` shape.
- `send_message(channel, text)`: the same, the channel under its other usual name.
- `read_history(channel_id)`: reads a channel (not a posting tool).
"""

import json
import os

from mcp.server import MCPServer

server = MCPServer("poster")


def record(tool: str, arguments: dict) -> str:
    with open(os.environ["POSTER_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
    return json.dumps({"ok": True, "tool": tool, **arguments})


@server.tool()
def post_message(channel_id: str, text: str) -> str:
    """Post a message to a Slack channel."""
    return record("post_message", {"channel_id": channel_id, "text": text})


@server.tool()
def send_message(channel: str, text: str) -> str:
    """Send a message to a Slack channel."""
    return record("send_message", {"channel": channel, "text": text})


@server.tool()
def read_history(channel_id: str) -> str:
    """Read a channel's recent messages."""
    return record("read_history", {"channel_id": channel_id})


if __name__ == "__main__":
    server.run()
