"""Write skillhost skills in Python.

A skill is a module (``app.py`` by default) that declares tools with :func:`tool`; the
JSON schema of each tool's input comes from the function's type hints, and descriptions
from its docstring::

    from skillhost import tool, memory

    @tool
    def remember(note: str, tag: str = "misc") -> dict:
        \"\"\"Save a note for later.

        Args:
            note: The text to save.
            tag: A one-word category.
        \"\"\"
        memory.write(f"notes/{tag}.md", note + "\\n", append=True)
        return {"saved": True}

Hooks are plain functions of the same module, found by name when ``skillhost skill build``
bundles the skill: ``resolve_human``, ``is_available``, ``startup``, ``scheduled`` (every
``[schedule] every`` of ``skill.toml`` while ``skillhost run`` serves), ``before_mcp_call``,
``observe_mcp_result``, ``tool_result_empty`` and ``tool_target``. Facts about the skill are
module constants: ``MCP_TOOLS``, ``MCP_SERVERS``, ``MCP_PREREQUISITES``, ``VERIFY``.

``os.environ`` holds exactly the variables the skill's ``skill.toml`` names
(``[capabilities] env``) and the operator grants (``skills.grants.<skill>.env``), in every
call: that is where ``is_available`` and ``startup`` find credentials.

With ``[capabilities] files = "self"`` in ``skill.toml`` (no operator grant needed) the skill
reads its own distributable files (the folder without its sources, build output and hidden
files; files over 16 MiB and symlinks out of the folder left out), read-only, at ``/skill``,
which is the working directory of each tool call: ``open("data.csv")`` reads the folder's
``data.csv``. ``ctx["state"]`` and :mod:`skillhost.state` are per conversation unless the
manifest says ``state = "skill"``.

The host's imports are the modules :mod:`skillhost.log`, :mod:`skillhost.memory`,
:mod:`skillhost.state`, :mod:`skillhost.http`, :mod:`skillhost.mcp`, :mod:`skillhost.notify`,
:mod:`skillhost.route` and :mod:`skillhost.progress`, :mod:`skillhost.ask` (asking whoever
drives the call, mid-call), :mod:`skillhost.lists` (a list of the skill changed while it
serves) and :mod:`skillhost.tasks` (going on as an MCP task); a failed import raises
:class:`HostError`. A module-level ``task_support()`` returning ``{tool: "optional" |
"required" | "detaches" | "may_detach"}`` says which tools run as MCP tasks.
"""

from ._tool import Context, Coverage, Image, Json, McpDecision, Param, ResourceLink, Target, ToolError, ToolResult, tool
from ._errors import HostError
from . import ask, http, lists, log, mcp, memory, notify, progress, route, state, tasks

__all__ = [
    "Context",
    "Coverage",
    "HostError",
    "Image",
    "Json",
    "McpDecision",
    "Param",
    "ResourceLink",
    "Target",
    "ToolError",
    "ToolResult",
    "tool",
    "ask",
    "http",
    "lists",
    "log",
    "mcp",
    "memory",
    "notify",
    "progress",
    "route",
    "state",
    "tasks",
]
