"""Files under the operator's memory root (needs ``memory = true`` in ``skill.toml``).

Paths are relative to the root; failures raise :class:`skillhost.HostError`.
"""

import json
from typing import Any, Dict, List, Optional

from ._errors import call


def read(path: str) -> Optional[str]:
    """A file's text; ``None`` when it does not exist."""
    from wit_world.imports import memory as raw

    return call("memory", raw.read, path)


def write(path: str, content: str, append: bool = False) -> None:
    """Writes (or with ``append=True`` appends to) a file, creating parent directories."""
    from wit_world.imports import memory as raw

    mode = raw.WriteMode.APPEND if append else raw.WriteMode.OVERWRITE
    call("memory", raw.write, path, content, mode)


def read_json(path: str) -> Optional[Any]:
    """A JSON file's value; ``None`` when it does not exist."""
    from wit_world.imports import memory as raw

    text = call("memory", raw.read_json, path)
    return None if text is None else json.loads(text)


def search(query: str) -> List[Dict[str, Any]]:
    """Lines containing ``query`` (case-insensitive): ``[{"path", "line", "text"}]``, at most 100."""
    from wit_world.imports import memory as raw

    return [{"path": h.path, "line": h.line, "text": h.text} for h in call("memory", raw.search, query)]
