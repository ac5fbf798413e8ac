"""Calls a tool of an MCP server the skill declares in ``MCP_TOOLS`` / ``MCP_SERVERS``."""

import json
from typing import Any, Dict, Optional

from ._errors import call


def call_tool(server: str, tool: str, arguments: Optional[Dict[str, Any]] = None) -> str:
    """The result's text content; failures raise :class:`skillhost.HostError`."""
    from wit_world.imports import mcp as raw

    return call("mcp", raw.call_tool, server, tool, json.dumps(arguments or {}))
