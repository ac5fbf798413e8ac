"""The current turn's routing attributes (``Context.route`` of later calls)."""


def set_attribute(key: str, value: str) -> None:
    """Sets an attribute that later tool calls and hooks of this turn see."""
    from wit_world.imports import route as raw

    raw.set_attribute(key, value)
