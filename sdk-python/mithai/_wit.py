"""The one place where mithai's skill interface meets skillhost's WIT contract.

Everything that reads a WIT record (``call-context``) or builds one (``tool-def``,
``tool-result``, ``preflight-decision``, ``target``, ``skill-info``) is here; the rest of the
shim speaks mithai only. When the contract changes, this file changes:

- ``_context`` turns a ``call-context`` into the ``ctx`` dict (its ``user-message`` fills
  ``ToolRouteContext.user_message`` and ``IncomingMessage.text``).
- ``Availability`` / ``Startup``: the variables the host grants are the guest's WASI
  environment, which ``_sandbox.environ`` reads through.

The generated entry module calls :func:`bind` with the author's module while the component
is built, then names the export classes componentize-py looks for.
"""

import json
import traceback
from typing import Any, List, Optional, Sequence

# componentize-py loads while building only the binding modules that define types; `route`
# defines none, and nothing can be loaded later (the sandbox has no files).
import wit_world.imports.route  # noqa: F401
from skillhost import _folder, log

from . import _ctx, _sandbox
from .core.context import IncomingMessage, ToolRouteContext
from .core.coverage import CoverageObservation
from .core.mcp_preflight import MCPPreflightDecision
from .core.skill_loader import ToolExecutionResult

HOOKS = (
    "resolve_human", "is_available", "startup", "scheduled", "before_mcp_call", "observe_mcp_result",
    "tool_result_empty", "tool_target",
)
# The spec's `human` values -> the WIT's `approval`.
HUMAN = {None: "NONE", "approve": "APPROVE", "confirm": "CONFIRM", "dynamic": "DYNAMIC"}
TOOL_KEYS = ("name", "description", "input_schema", "human", "expose_result", "declares_coverage")

_module: Any = None


def bind(module: Any, exported: Sequence[str]) -> None:
    """Checks the author's module and makes it the one exported; ``exported`` are the hooks
    the build found (``def name(`` at the start of a line) and exports."""
    global _module
    _module = module
    if not isinstance(getattr(module, "TOOLS", None), (list, tuple)):
        raise TypeError("tools.py: a mithai skill needs a module-level TOOLS list (Anthropic tool schemas)")
    if not callable(getattr(module, "handle", None)):
        raise TypeError("tools.py: a mithai skill needs a module-level handle(name, input, ctx)")
    tool_defs(module.TOOLS)
    for hook in HOOKS:
        value = getattr(module, hook, None)
        if value is not None and not callable(value):
            raise TypeError(f"tools.py: {hook} is not callable")
        if (value is not None) != (hook in exported):
            raise TypeError(f"tools.py: define {hook} with `def {hook}(` at the start of a line (the build finds hooks so)")
    uses, servers, _, _ = skill_facts(module)
    if callable(getattr(module, "bind", None)):
        module.bind(_ctx.Engine(bool(uses or servers)), _ctx.Adapter())


def tool_defs(tools: Sequence[Any]) -> List[tuple]:
    """``TOOLS`` checked: ``(name, description, schema, approval, expose_result, declares_coverage)``."""
    defs = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise TypeError(f"tools.py: TOOLS[{i}] must be a dict with a string name")
        name = tool["name"]
        human = tool.get("human")
        if human not in HUMAN:
            raise ValueError(f"tools.py: TOOLS[{i}] ({name}): human must be None, 'approve', 'confirm' or 'dynamic', not {human!r}")
        unknown = sorted(set(tool) - set(TOOL_KEYS))
        if unknown:
            raise ValueError(f"tools.py: TOOLS[{i}] ({name}): unknown key(s) {', '.join(unknown)} (known: {', '.join(TOOL_KEYS)})")
        schema = tool.get("input_schema", {"type": "object", "properties": {}})
        defs.append((name, str(tool.get("description", "")), schema, HUMAN[human],
                     bool(tool.get("expose_result", False)), bool(tool.get("declares_coverage", False))))
    return defs


def skill_facts(module: Any) -> tuple:
    """``MCP_TOOLS``, ``MCP_SERVERS``, ``MCP_PREREQUISITES``, ``VERIFY``, checked."""
    uses = []
    for i, use in enumerate(getattr(module, "MCP_TOOLS", None) or []):
        if not isinstance(use, dict) or not isinstance(use.get("server"), str):
            raise TypeError(f"tools.py: MCP_TOOLS[{i}] must be a dict with a string server")
        uses.append((use["server"], [str(t) for t in use.get("tools", ["*"])]))
    servers = [str(s) for s in getattr(module, "MCP_SERVERS", None) or []]
    prerequisites = [str(p) for p in getattr(module, "MCP_PREREQUISITES", None) or []]
    return uses, servers, prerequisites, bool(getattr(module, "VERIFY", False))


def _context(ctx: Any) -> dict:
    route = dict(ctx.route)
    text = getattr(ctx, "user_message", None)
    message = IncomingMessage(text, ctx.channel_id, ctx.user_id, route)
    route_context = ToolRouteContext(user_message=text, incoming_message=message)
    return _ctx.make(json.loads(ctx.config or "{}"), ctx.channel_id, ctx.user_id, route_context)


def _call(hook: str, *args: Any) -> Any:
    _sandbox.RUNTIME["on"] = True
    return getattr(_module, hook)(*args)


def _failure(err: BaseException) -> str:
    """An exception as the model and the operator read it: the author's line first."""
    if isinstance(err, _sandbox.SandboxError):
        return str(err)
    at = _sandbox.where_raised(err)
    text = f"{type(err).__name__}: {err}"
    return f"{at}: {text}" if at else text


def _result(value: Any, metadata: dict):
    from wit_world.imports import types

    succeeded, coverage = None, None
    if isinstance(value, ToolExecutionResult):
        value, succeeded, coverage = value.content, value.succeeded, value.coverage
    content = value if isinstance(value, str) else json.dumps(value)
    is_empty = metadata.get("is_empty") if isinstance(metadata, dict) else None
    return types.ToolResult(content, None if succeeded is None else bool(succeeded),
                            is_empty if isinstance(is_empty, bool) else None, _coverage(coverage), [])


def _coverage(c: Any):
    from wit_world.imports import types

    if isinstance(c, dict):
        c = CoverageObservation(**c)
    if not isinstance(c, CoverageObservation):
        return None
    try:
        status, state = types.CoverageStatus[c.status.upper()], types.ResultState[c.result_state.upper()]
    except (KeyError, AttributeError):
        log.warn("coverage dropped: status must be complete or partial, result_state data or empty")
        return None
    scope = lambda s: None if s is None else json.dumps(s)  # noqa: E731
    return types.Coverage(c.subject, scope(c.attempted_scope), scope(c.covered_scope), status, state)


class Tools:
    """The required ``tools`` export: ``TOOLS``, ``handle`` and the module's constants."""

    def list_tools(self):
        from wit_world.imports import types

        no_hints = types.ToolHints(None, None, None, None, None)
        return [types.ToolDef(name, text, json.dumps(schema), types.Approval[approval], expose, coverage, None, no_hints)
                for name, text, schema, approval, expose, coverage in tool_defs(_module.TOOLS)]

    def handle(self, name: str, input: str, ctx):
        from wit_world.imports import types

        # `open("data.csv")` of a tools.py reads the skill's folder, as beside mithai.
        _folder.enter()
        context = _context(ctx)
        try:
            value = _call("handle", name, json.loads(input), context)
        except Exception as err:  # the model reads the failure; the log keeps the traceback
            log.error(f"{name} raised {type(err).__name__}", traceback=traceback.format_exc())
            return types.ToolResult(json.dumps({"error": _failure(err)}), False, None, None, [])
        return _result(value, context["mcp_execution_metadata"])

    def info(self):
        from wit_world.imports import types

        uses, servers, prerequisites, verify = skill_facts(_module)
        return types.SkillInfo([types.McpUse(s, t) for s, t in uses], servers, prerequisites, verify)


class ResolveHuman:
    """``resolve_human(name, input, ctx)`` -> ``None``, ``"approve"`` or ``"confirm"``; anything
    else fails the hook, and the host then asks for approval."""

    def resolve_human(self, name: str, input: str, ctx):
        from wit_world.imports import types

        level = _call("resolve_human", name, json.loads(input), _context(ctx))
        if level is None:
            return None
        if level not in ("approve", "confirm"):
            raise ValueError(f"resolve_human returned {level!r}: None, 'approve' or 'confirm'")
        return types.HumanLevel[level.upper()]


class Availability:
    """``is_available()`` -> bool; any other answer, or an exception, stops loading (the spec)."""

    def is_available(self, config: str) -> bool:
        # mithai's hook takes nothing: it reads its credentials from ``os.environ``.
        answer = _call("is_available")
        if not isinstance(answer, bool):
            raise TypeError("is_available must return a bool")
        return answer


class Startup:
    """``startup(config)``; an exception stops the host with its message and the author's line."""

    def startup(self, config: str) -> None:
        from componentize_py_types import Err

        try:
            _call("startup", json.loads(config or "{}"))
        except Exception as err:
            raise Err(_failure(err))


class Scheduled:
    """``scheduled(config)``, every ``[schedule] every`` of ``skill.toml`` (skillhost's form of the
    polling thread a mithai ``startup`` starts); an exception fails the run, which the host logs
    and counts, and the next run comes as usual."""

    def scheduled(self, config: str) -> None:
        from componentize_py_types import Err

        try:
            _call("scheduled", json.loads(config or "{}"))
        except Exception as err:
            raise Err(_failure(err))


class BeforeMcpCall:
    """``before_mcp_call(server_name, tool_name, arguments, ctx)`` -> :class:`MCPPreflightDecision`
    or ``None`` (proceed); another answer fails the hook, and the host refuses the call."""

    def before_mcp_call(self, server: str, tool: str, arguments: str, ctx):
        from wit_world.imports import types

        d = _call("before_mcp_call", server, tool, json.loads(arguments), _context(ctx)) or MCPPreflightDecision()
        if not isinstance(d, MCPPreflightDecision):
            raise TypeError(f"before_mcp_call returned {type(d).__name__}, not MCPPreflightDecision")
        if d.kind == "deny":
            kind = types.PreflightKind_Deny()
        elif d.kind == "prerequisite":
            p = d.prerequisite
            if p.server not in (None, server):
                raise ValueError(f"before_mcp_call: the prerequisite must be on {server}, not {p.server}")
            kind = types.PreflightKind_Prerequisite(types.Prerequisite(p.tool, json.dumps(p.arguments or {})))
        else:
            kind = types.PreflightKind_Proceed()
        dump = lambda v: None if v is None else json.dumps(v)  # noqa: E731
        return types.PreflightDecision(kind, dump(d.corrected_arguments), d.correction, dump(d.context))


class ObserveMcpResult:
    """``observe_mcp_result(...)``: a string replaces the result; anything else, or an
    exception (logged), keeps the original."""

    def observe_mcp_result(self, server: str, tool: str, arguments: str, output: str, ctx) -> Optional[str]:
        try:
            answer = _call("observe_mcp_result", server, tool, json.loads(arguments), output, _context(ctx))
        except Exception as err:
            log.warn(f"observe_mcp_result raised: {_failure(err)}")
            return None
        return answer if isinstance(answer, str) else None


class ToolResultEmpty:
    """``tool_result_empty(tool_name, raw_result)`` -> bool; ``None``, another type or an
    exception (logged) falls back to the handler's ``is_empty``, then generic emptiness."""

    def tool_result_empty(self, tool_name: str, raw_result: str) -> Optional[bool]:
        try:
            answer = _call("tool_result_empty", tool_name, raw_result)
        except Exception as err:
            log.warn(f"tool_result_empty raised: {_failure(err)}")
            return None
        return answer if isinstance(answer, bool) else None


class ToolTarget:
    """``tool_target(tool_name, tool_input)`` -> ``{"target", "query_kind"}`` or ``None``; the
    host drops values of the wrong type or length."""

    def tool_target(self, tool_name: str, tool_input: str):
        from wit_world.imports import types

        try:
            answer = _call("tool_target", tool_name, json.loads(tool_input))
        except Exception as err:
            log.warn(f"tool_target raised: {_failure(err)}")
            return None
        if not isinstance(answer, dict):
            return None
        text = lambda key: answer.get(key) if isinstance(answer.get(key), str) else None  # noqa: E731
        return types.Target(text("target"), text("query_kind"))
