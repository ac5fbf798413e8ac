"""{{name}}: a skillhost skill. Its one tool, `hello`, greets someone.

`skillhost skill build` bundles the skillhost Python SDK and builds this module with
componentize-py. A tool's input schema comes from its type hints, its descriptions from
the docstring.
"""

from skillhost import tool


@tool
def hello(name: str, excited: bool = False) -> dict:
    """Greet someone by name.

    Args:
        name: Who to greet.
        excited: Add an exclamation mark.
    """
    return {"greeting": f"Hello, {name}{'!' if excited else '.'}"}
