"""Telling the host that a list of the skill changed while it serves:
``lists.changed("tools")`` (or ``"prompts"``, ``"resources"``). The host describes the skill
again (its tools asked anew) and tells MCP clients; a no-op where nothing serves
(``skillhost call``)."""


def changed(which: str) -> None:
    """The skill's ``which`` list (``tools``, ``prompts`` or ``resources``) changed."""
    from wit_world.imports import lists as raw

    kinds = {"tools": raw.WhichList.TOOLS, "prompts": raw.WhichList.PROMPTS, "resources": raw.WhichList.RESOURCES}
    if which not in kinds:
        raise ValueError(f"which list? {which!r}: tools, prompts or resources")
    raw.changed(kinds[which])
