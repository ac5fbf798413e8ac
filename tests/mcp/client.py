"""A real MCP client (the official `mcp` Python SDK) driving `skillhost mcp` in the tests.

usage: client.py <elicit> <calls-json> stdio <command> [args...]
       client.py <elicit> <calls-json> http <url> [bearer-token]

<elicit>: `approve` (accept: approve=true, confirmation=CONFIRM), `deny` (decline), or `none`
(the client declares no elicitation support). <calls-json>: [[tool, arguments], ...].
Prints one JSON object: the protocol version in use, tools, prompts, the first prompt's text,
each call's result and the elicitation messages it was asked.

MCP_MODE (environment) is the SDK's connect mode: `legacy` (the default: the `initialize`
handshake), `auto` (`server/discover` at the newest revision, falling back to the handshake),
a revision to adopt directly, or `default` (no mode given: the SDK's own default).
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult


async def main() -> None:
    elicit, calls, transport, target, *rest = sys.argv[1:]
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        if elicit == "approve":
            return ElicitResult(action="accept", content={"approve": True, "confirmation": "CONFIRM"})
        return ElicitResult(action="decline")

    if transport == "stdio":
        server = StdioServerParameters(command=target, args=rest, env=dict(os.environ))
    else:
        headers = {"Authorization": f"Bearer {rest[0]}"} if rest else {}
        server = streamable_http_client(target, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    callback = None if elicit == "none" else on_elicit
    mode = os.environ.get("MCP_MODE", "legacy")
    # `default`: whatever the SDK does when no mode is given.
    modes = {} if mode == "default" else {"mode": mode}
    async with Client(server, elicitation_callback=callback, **modes) as client:
        version = client.protocol_version
        results = []
        for name, arguments in json.loads(calls):
            try:
                result = await client.call_tool(name, arguments)
            except MCPError as e:
                # A JSON-RPC error (an unknown tool): reported with its code.
                results.append({"tool": name, "is_error": True, "error_code": e.code, "text": e.message})
                continue
            text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            results.append({"tool": name, "is_error": bool(result.is_error), "text": text})
        # Listed after the calls: a skill still compiling when the session began joins the
        # lists later (the client is told they changed); a call of its tool waits for it, so
        # by now every skill the calls name is listed, however slow the machine.
        tools = await client.list_tools()
        prompts = await client.list_prompts()
        first = None
        if prompts.prompts:
            got = await client.get_prompt(prompts.prompts[0].name)
            first = got.messages[0].content.text
    print(json.dumps({
        "protocol_version": version,
        "tools": [t.name for t in tools.tools],
        "prompts": [p.name for p in prompts.prompts],
        "first_prompt": first,
        "results": results,
        "asked": asked,
    }))


asyncio.run(main())
