"""A persistent key-value store; failures raise :class:`skillhost.HostError`.

By default the keys are the conversation's: every agent and channel (an MCP session, a
``skillhost call --channel``) has its own, and a key expires ``skills.state_ttl_seconds`` (a day
unless the operator says otherwise) after its last get or set. With ``[capabilities] state =
"skill"`` in ``skill.toml`` the keys are the skill's own, shared by every conversation, and never
expire. ``startup``, ``scheduled`` and ``is_available`` serve no conversation: they always see the
skill's own keys. No skill sees another's.
"""

import json
from typing import Any, List, Optional

from ._errors import call


def get(key: str) -> Optional[str]:
    """A key's value; ``None`` when it is not set."""
    from wit_world.imports import state as raw

    return call("state", raw.get, key)


def set(key: str, value: str) -> None:  # noqa: A001 - the WIT name
    """Sets a key."""
    from wit_world.imports import state as raw

    call("state", raw.set, key, value)


def delete(key: str) -> None:
    """Removes a key (a missing key is not an error)."""
    from wit_world.imports import state as raw

    call("state", raw.delete, key)


def keys() -> List[str]:
    """The skill's keys, sorted."""
    from wit_world.imports import state as raw

    return call("state", raw.keys)


def get_json(key: str, default: Any = None) -> Any:
    """A key holding JSON, decoded; ``default`` when it is not set."""
    text = get(key)
    return default if text is None else json.loads(text)


def set_json(key: str, value: Any) -> None:
    """Sets a key to ``value`` encoded as JSON."""
    set(key, json.dumps(value))
