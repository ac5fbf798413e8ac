"""The component's exports, built from the skill module: its ``@tool`` functions, its hook
functions and its constants. ``skillhost skill build`` generates the entry module that binds
the skill module here and names the classes componentize-py looks for."""

import json
import traceback
from typing import Any, Optional

from . import _folder, log
from ._tool import TOOLS, Context, Coverage, Image, Json, McpDecision, ResourceLink, Target, ToolError, ToolResult, encode

_module: Any = None


def bind(module: Any) -> None:
    """Makes ``module`` (the skill's own) the one whose hooks and constants are exported."""
    global _module
    _module = module


def _context(ctx) -> Context:
    return Context(json.loads(ctx.config or "{}"), ctx.channel_id, ctx.user_id, dict(ctx.route), ctx.user_message)


def _result(value: Any):
    from wit_world.imports import types

    if not isinstance(value, ToolResult):
        value = ToolResult(value)
    return types.ToolResult(encode(value.content), value.succeeded, value.is_empty, _coverage(value.coverage),
                            [_block(b) for b in value.blocks])


def _block(b: Any):
    from wit_world.imports import types

    if isinstance(b, Json):
        return types.ContentBlock_Json(json.dumps(b.value))
    if isinstance(b, Image):
        return types.ContentBlock_Image(types.Image(b.mime_type, bytes(b.data)))
    if isinstance(b, ResourceLink):
        return types.ContentBlock_ResourceLink(types.ResourceLink(b.uri, b.name, b.mime_type, b.description))
    return types.ContentBlock_Text(encode(b))


def _coverage(c: Optional[Coverage]):
    if c is None:
        return None
    from wit_world.imports import types

    scope = lambda s: None if s is None else json.dumps(s)  # noqa: E731
    return types.Coverage(
        c.subject, scope(c.attempted_scope), scope(c.covered_scope),
        types.CoverageStatus[c.status.upper()], types.ResultState[c.result_state.upper()],
    )


def _where(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


class Tools:
    """The required ``tools`` export."""

    def list_tools(self):
        from wit_world.imports import types

        return [
            types.ToolDef(t.name, t.description, json.dumps(t.schema), types.Approval[t.approval.upper()],
                          t.expose_result, t.declares_coverage,
                          None if t.output_schema is None else json.dumps(t.output_schema),
                          types.ToolHints(t.hints.get("title"), t.hints.get("read_only"), t.hints.get("destructive"),
                                          t.hints.get("idempotent"), t.hints.get("open_world")))
            for t in TOOLS
        ]

    def handle(self, name: str, input: str, ctx):
        _folder.enter()
        tool = next((t for t in TOOLS if t.name == name), None)
        if tool is None:
            return _result(ToolResult.error(f"unknown tool: {name}"))
        args = json.loads(input)
        if tool.wants_ctx:
            args["ctx"] = _context(ctx)
        try:
            return _result(tool.function(**args))
        except ToolError as err:
            return _result(ToolResult.error(str(err)))
        except Exception as err:  # the model reads the failure; the log keeps the traceback
            log.error(f"{name} raised {type(err).__name__}", traceback=traceback.format_exc())
            return _result(ToolResult.error(f"{type(err).__name__}: {err}", at=_where(err)))

    def info(self):
        from wit_world.imports import types

        uses = [types.McpUse(u["server"], list(u.get("tools", ["*"]))) for u in _constant("MCP_TOOLS", [])]
        return types.SkillInfo(
            uses, list(_constant("MCP_SERVERS", [])), list(_constant("MCP_PREREQUISITES", [])),
            bool(_constant("VERIFY", False)),
        )


def _constant(name: str, default: Any) -> Any:
    return getattr(_module, name, default)


def _hook(name: str):
    return getattr(_module, name)


class ResolveHuman:
    """``resolve_human(tool, input, ctx)`` -> ``None``, ``"approve"`` or ``"confirm"``."""

    def resolve_human(self, name: str, input: str, ctx):
        from wit_world.imports import types

        level = _hook("resolve_human")(name, json.loads(input), _context(ctx))
        if level in (None, "none"):
            return None
        return types.HumanLevel[str(level).upper()]


class Availability:
    """``is_available()`` or ``is_available(config: dict)`` -> bool.

    The spec's hook takes no argument and reads credentials from ``os.environ`` (which holds
    exactly the variables the manifest names and the operator grants); one that takes a
    parameter also receives the skill's config block."""

    def is_available(self, config: str) -> bool:
        import inspect

        hook = _hook("is_available")
        try:
            wants_config = len(inspect.signature(hook).parameters) > 0
        except (TypeError, ValueError):
            wants_config = False
        answer = hook(json.loads(config or "{}")) if wants_config else hook()
        if not isinstance(answer, bool):
            raise TypeError(f"is_available returned {type(answer).__name__}, not bool")
        return answer


class Startup:
    """``startup(config: dict)``; raising stops the host with the exception's message."""

    def startup(self, config: str) -> None:
        from componentize_py_types import Err

        try:
            _hook("startup")(json.loads(config or "{}"))
        except Exception as err:
            raise Err(f"{type(err).__name__}: {err}")


class Scheduled:
    """``scheduled(config: dict)``, every ``[schedule] every``; raising fails the run (logged and
    counted by the host), and the next run comes as usual."""

    def scheduled(self, config: str) -> None:
        from componentize_py_types import Err

        try:
            _hook("scheduled")(json.loads(config or "{}"))
        except Exception as err:
            raise Err(f"{type(err).__name__}: {err}")


class BeforeMcpCall:
    """``before_mcp_call(server, tool, arguments, ctx)`` -> :class:`McpDecision` or ``None``."""

    def before_mcp_call(self, server: str, tool: str, arguments: str, ctx):
        from wit_world.imports import types

        d = _hook("before_mcp_call")(server, tool, json.loads(arguments), _context(ctx)) or McpDecision()
        if d.kind == "deny":
            kind = types.PreflightKind_Deny()
        elif d.kind == "prerequisite":
            kind = types.PreflightKind_Prerequisite(
                types.Prerequisite(d.prerequisite_tool, json.dumps(d.prerequisite_arguments or {})))
        else:
            kind = types.PreflightKind_Proceed()
        dump = lambda v: None if v is None else json.dumps(v)  # noqa: E731
        return types.PreflightDecision(kind, dump(d.corrected_arguments), d.correction, dump(d.context))


class ObserveMcpResult:
    """``observe_mcp_result(server, tool, arguments, output, ctx)`` -> replacement text or ``None``."""

    def observe_mcp_result(self, server: str, tool: str, arguments: str, output: str, ctx) -> Optional[str]:
        answer = _hook("observe_mcp_result")(server, tool, json.loads(arguments), output, _context(ctx))
        return answer if isinstance(answer, str) else None


class ToolResultEmpty:
    """``tool_result_empty(tool_name, raw_result)`` -> bool or ``None``."""

    def tool_result_empty(self, tool_name: str, raw_result: str) -> Optional[bool]:
        answer = _hook("tool_result_empty")(tool_name, raw_result)
        return answer if isinstance(answer, bool) else None


class ToolTarget:
    """``tool_target(tool_name, tool_input)`` -> :class:`Target`, a dict, or ``None``."""

    def tool_target(self, tool_name: str, tool_input: str):
        from wit_world.imports import types

        answer = _hook("tool_target")(tool_name, json.loads(tool_input))
        if isinstance(answer, dict):
            answer = Target(answer.get("target"), answer.get("query_kind"))
        if not isinstance(answer, Target):
            return None
        return types.Target(answer.target, answer.query_kind)


class ClientCapabilities:
    """``required_client_capabilities()`` -> ``{tool: ["sampling" | "elicitation" | "roots", ...]}``:
    the MCP client capabilities those tools cannot run without."""

    def required(self):
        answer = _hook("required_client_capabilities")() or {}
        return [(str(tool), [str(need) for need in needs]) for tool, needs in answer.items()]


class TaskSupport:
    """``task_support()`` -> ``{tool: "optional" | "required" | "detaches" | "may_detach"}``: the
    tools that may run as tasks of the MCP Tasks extension (``detaches``: only as a task, which
    begins when the tool calls ``skillhost.tasks.detach()``; ``may_detach``: likewise when the
    client can poll one)."""

    def tools(self):
        from wit_world.exports import task_support as wit

        kinds = {
            "optional": (wit.Support.OPTIONAL, False),
            "required": (wit.Support.REQUIRED, False),
            "detaches": (wit.Support.REQUIRED, True),
            "may_detach": (wit.Support.OPTIONAL, True),
        }
        answer = _hook("task_support")() or {}
        tools = []
        for name, kind in answer.items():
            if kind not in kinds:
                raise ValueError(f"task_support: tool {name!r} is {kind!r}; one of {', '.join(kinds)}")
            support, detaches = kinds[kind]
            tools.append(wit.TaskTool(str(name), support, detaches))
        return tools
