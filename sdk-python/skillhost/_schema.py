"""JSON schemas from type hints, descriptions from docstrings (Google style ``Args:``)."""

import enum
import inspect
import re
import typing
from typing import Any, Dict, Tuple

_PRIMITIVES = {str: "string", int: "integer", float: "number", bool: "boolean"}


class Param:
    """Extra schema for one parameter, through ``Annotated``::

        top: Annotated[int, Param("How many to list.", minimum=0, maximum=100)] = 10

    Keyword arguments are JSON Schema keywords, copied as they are.
    """

    def __init__(self, description: typing.Optional[str] = None, **keywords: Any):
        self.description = description
        self.keywords = keywords


def type_schema(hint: Any, where: str) -> Dict[str, Any]:
    """The JSON schema of one type hint; ``where`` names the parameter in errors."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = type_schema(args[0], where)
        for extra in args[1:]:
            if isinstance(extra, Param):
                if extra.description:
                    schema["description"] = extra.description
                schema.update(extra.keywords)
            elif isinstance(extra, str):
                schema["description"] = extra
        return schema
    if hint in _PRIMITIVES:
        return {"type": _PRIMITIVES[hint]}
    if hint is Any:
        return {}
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return type_schema(options[0], where)
        return {"anyOf": [type_schema(a, where) for a in options]}
    if origin is typing.Literal:
        schema = {"enum": list(args)}
        kinds = {_PRIMITIVES.get(type(a)) for a in args}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        return type_schema(typing.Literal[tuple(m.value for m in hint)], where)
    if hint in (list, tuple, set) or origin in (list, tuple, set, typing.List, typing.Sequence):
        schema = {"type": "array"}
        if args and args[-1] is not Ellipsis:
            schema["items"] = type_schema(args[0], where)
        return schema
    if hint is dict or origin in (dict, typing.Dict, typing.Mapping):
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = type_schema(args[1], where)
        return schema
    raise TypeError(f"{where}: no JSON schema for type {hint!r} (use str, int, float, bool, list, dict, "
                    "Optional, Literal, an Enum, or Annotated[..., Param(...)])")


def parse_docstring(doc: typing.Optional[str]) -> Tuple[str, Dict[str, str]]:
    """The summary (text before ``Args:``) and the per-argument descriptions."""
    lines = inspect.cleandoc(doc or "").splitlines()
    if "Args:" not in lines:
        return "\n".join(lines).strip(), {}
    at = lines.index("Args:")
    args: Dict[str, str] = {}
    current, indent = None, None
    for line in lines[at + 1:]:
        if line and not line[0].isspace():
            break  # the next section (Returns:, Raises:, ...)
        depth = len(line) - len(line.lstrip())
        match = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if match and (indent is None or depth <= indent):
            current, indent = match.group(1), depth
            args[current] = match.group(2).strip()
        elif current and line.strip():
            args[current] = (args[current] + " " + line.strip()).strip()
    return "\n".join(lines[:at]).strip(), args


def function_schema(fn, skip: typing.Collection[str]) -> Tuple[Dict[str, Any], str]:
    """The input schema of ``fn``'s parameters (minus ``skip``) and its docstring summary."""
    summary, described = parse_docstring(fn.__doc__)
    hints = typing.get_type_hints(fn, include_extras=True)
    properties: Dict[str, Any] = {}
    required = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip:
            continue
        where = f"{fn.__qualname__}({name})"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs cannot be described by a schema")
        if name not in hints:
            raise TypeError(f"{where}: the parameter needs a type hint (its JSON schema comes from it)")
        schema = type_schema(hints[name], where)
        if name in described and "description" not in schema:
            schema["description"] = described[name]
        if param.default is param.empty:
            required.append(name)
        elif param.default is not None and isinstance(param.default, (str, int, float, bool)):
            schema.setdefault("default", param.default)
        properties[name] = schema
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, summary
