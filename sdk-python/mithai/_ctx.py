"""The ``ctx`` dict a mithai ``handle`` and its hooks receive, over the host's imports.

``config`` (the skill's ``skills.config`` block), ``memory`` (``read``, ``write(append=)``,
``read_json``, ``search``; false when the skill has no memory grant, so ``if memory:`` skips),
``state`` (``get``, ``set``, ``delete``, ``keys``; values kept as JSON), ``logger`` (``info``,
``warning``, ``error``, ... with keyword fields), ``channel_id``, ``user_id``,
``tool_route_context`` and ``mcp_execution_metadata`` (a handler may set ``is_empty``), and
``ask``, which asks whoever drives the call mid-call (:mod:`skillhost.ask`):
``ctx["ask"]({"owner": ctx["ask"].form("Who owns this?", schema)})``.
"""

import json
import traceback
from typing import Any, Dict, List, Optional

from skillhost import HostError, log, mcp, notify
from skillhost import ask as _ask
from skillhost import memory as _memory
from skillhost import state as _state


class Memory:
    """``ctx["memory"]``: files under the operator's memory root, paths relative to it."""

    def __init__(self) -> None:
        self._granted: Optional[bool] = None

    def __bool__(self) -> bool:
        # One host call, on the first truth test: an empty path is refused before the disk.
        if self._granted is None:
            try:
                _memory.read("")
                self._granted = True
            except HostError as err:
                self._granted = err.kind != "denied"
        return self._granted

    def read(self, path: str) -> Optional[str]:
        """A file's text; ``None`` when it does not exist."""
        return _memory.read(path)

    def write(self, path: str, content: str, append: bool = False) -> None:
        """Writes (or with ``append=True`` appends to) a file, creating parent directories."""
        _memory.write(path, content, append=append)

    def read_json(self, path: str) -> Any:
        """A JSON file's value; ``None`` when it does not exist."""
        return _memory.read_json(path)

    def search(self, query: str) -> List[Dict[str, Any]]:
        """Lines containing ``query`` (case-insensitive): ``[{"path", "line", "text"}]``."""
        return _memory.search(query)


class State:
    """``ctx["state"]``: the persistent key-value store (values stored as JSON): the conversation's,
    expiring after ``skills.state_ttl_seconds`` untouched, or with ``state = "skill"`` in
    ``skill.toml`` the skill's own (see :mod:`skillhost.state`)."""

    def get(self, key: str, default: Any = None) -> Any:
        """A key's value; ``default`` when it is not set."""
        text = _state.get(key)
        if text is None:
            return default
        try:
            return json.loads(text)
        except ValueError:
            return text  # written by something other than this class

    def set(self, key: str, value: Any) -> None:  # noqa: A003 - mithai's name
        """Sets a key to any value JSON encodes."""
        _state.set(key, json.dumps(value))

    def delete(self, key: str) -> None:
        """Removes a key (a missing key is not an error)."""
        _state.delete(key)

    def keys(self) -> List[str]:
        """The skill's keys, sorted."""
        return _state.keys()


class Logger:
    """``ctx["logger"]``: structured records in the host's log, attributed to the skill."""

    def _log(self, level: str, message: Any, args: tuple, fields: Dict[str, Any]) -> None:
        text = str(message) % args if args else str(message)
        if fields.pop("exc_info", False):
            fields["traceback"] = traceback.format_exc()
        fields.pop("stack_info", None)
        log.log(level, text, **fields)

    def debug(self, message: Any, *args: Any, **fields: Any) -> None:
        """Detail for whoever debugs the skill."""
        self._log("debug", message, args, fields)

    def info(self, message: Any, *args: Any, **fields: Any) -> None:
        """Normal progress."""
        self._log("info", message, args, fields)

    def warning(self, message: Any, *args: Any, **fields: Any) -> None:
        """Something unexpected that the skill handled."""
        self._log("warn", message, args, fields)

    warn = warning

    def error(self, message: Any, *args: Any, **fields: Any) -> None:
        """Something failed."""
        self._log("error", message, args, fields)

    critical = error

    def exception(self, message: Any, *args: Any, **fields: Any) -> None:
        """An error with the current exception's traceback."""
        fields["exc_info"] = True
        self._log("error", message, args, fields)


class McpManager:
    """``engine.mcp_manager`` for ``bind(engine, adapter)``: calls go through the ``mcp`` import."""

    def call_tool(self, server_name: str, tool_name: str, arguments: Optional[Dict[str, Any]] = None) -> str:
        """The result's text; a failure raises ``skillhost.HostError``."""
        return mcp.call_tool(server_name, tool_name, arguments or {})


class Ask:
    """``ctx["ask"]``: one round of requests to whoever drives the call, by key (see
    :mod:`skillhost.ask`); ``form``, ``sampling`` and ``roots`` make the requests."""

    form = staticmethod(_ask.form)
    sampling = staticmethod(_ask.sampling)
    roots = staticmethod(_ask.roots)

    def __call__(self, requests: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
        """The answers by key; a round with none raises ``skillhost.HostError``."""
        return _ask.ask(requests)


class Adapter:
    """What ``bind(engine, adapter)`` receives as ``adapter``: ``send`` posts through the agent's
    chat adapters (the ``notify`` import). ``channel`` is ``slack:<id>`` / ``telegram:<id>``, or a
    bare id when one granted destination has it; failures raise ``skillhost.HostError``."""

    def send(self, channel: str, text: str, wake: bool = False) -> None:
        """Posts ``text``; ``wake=True`` then has the agent run a turn on it."""
        notify.send(str(channel), str(text), wake=bool(wake))


class Engine:
    """What ``bind(engine, adapter)`` receives as ``engine``: only the read-only ``mcp_manager``
    accessor, ``None`` (as the spec's is with no MCP server configured) when the skill's
    ``MCP_TOOLS`` and ``MCP_SERVERS`` name no server: it could reach none."""

    def __init__(self, has_servers: bool) -> None:
        self.mcp_manager: Optional[McpManager] = McpManager() if has_servers else None


def make(config: Dict[str, Any], channel_id: str, user_id: Optional[str], route_context: Any) -> Dict[str, Any]:
    """The ``ctx`` dict of one call."""
    return {
        "config": config,
        "memory": Memory(),
        "state": State(),
        "logger": Logger(),
        "channel_id": channel_id,
        "user_id": user_id,
        "tool_route_context": route_context,
        "mcp_execution_metadata": {},
        "ask": Ask(),
    }
