"""`obs`: a small MCP server built with the official `mcp` Python SDK, for the host's tests.

Tools:
- `list_things()`: a read-only prerequisite; counts its calls.
- `get_logs(service, corrected)`: echoes what it received and how often `list_things` ran.
- `search_events(case)`: a result with a `mithai/coverage` descriptor in `_meta`, valid or
  broken as `case` says; advertised with `_meta: {"mithai/coverage": true}`.
- `get_log_attributes(start_time_iso, end_time_iso, lookback_minutes, service)`: echoes the
  time arguments it received (for the temporal guardrails' tests).
- `fail()`: an `isError` result. `crash()`: the process exits. `empty()`: `[]`.
- `hidden()`: filtered out by the tests' `tools` list.
"""

import json
import os

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent

server = MCPServer("obs")
CALLS = {"list_things": 0}


@server.tool()
def list_things() -> str:
    """List the things (read-only)."""
    CALLS["list_things"] += 1
    return json.dumps(["thing-a", "thing-b"])


@server.tool()
def get_logs(service: str = "", corrected: bool = False) -> str:
    """Read a service's logs."""
    return json.dumps({"service": service, "corrected": corrected, "list_things_calls": CALLS["list_things"]})


@server.tool()
def get_log_attributes(
    start_time_iso: str | None = None,
    end_time_iso: str | None = None,
    lookback_minutes: int | None = None,
    service: str = "",
) -> str:
    """Log attribute names seen in a window; echoes the time arguments it received."""
    received = {"start_time_iso": start_time_iso, "end_time_iso": end_time_iso, "lookback_minutes": lookback_minutes}
    return json.dumps({"received": {k: v for k, v in received.items() if v is not None}, "service": service})


def descriptor(case: str):
    base = {
        "version": 1,
        "subject": "events",
        "attempted_scope": {"window": "requested"},
        "covered_scope": {"window": "searched"},
        "status": "partial" if case == "partial" else "complete",
        "result_state": "data",
    }
    if case == "bad_status":
        base["status"] = "mostly"
    elif case == "deep":
        base["covered_scope"] = {"a": {"b": {"c": {"d": {"e": 1}}}}}
    elif case == "oversized":
        base["covered_scope"] = {f"k{i}": "x" * 100 for i in range(50)}
    elif case == "long_subject":
        base["subject"] = "s" * 129
    elif case == "not_object":
        base["attempted_scope"] = ["window"]
    return base


@server.tool(meta={"mithai/coverage": True})
def search_events(case: str = "valid") -> CallToolResult:
    """Search events; attaches a coverage descriptor."""
    meta = None if case == "none" else {"mithai/coverage": descriptor(case)}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps({"events": [1, 2]}))], _meta=meta)


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("obs: this tool always fails")


@server.tool()
def crash() -> str:
    """Exits the server process."""
    os._exit(3)


@server.tool()
def empty() -> str:
    """Returns an empty list."""
    return "[]"


@server.tool()
def hidden() -> str:
    """Never offered: the tests' tools filter leaves it out."""
    return "hidden"


if __name__ == "__main__":
    server.run()
