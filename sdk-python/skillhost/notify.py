"""Messages the skill sends on its own: an alert a ``scheduled`` run found, a notice from a tool.

A destination is ``slack:<channel id>`` or ``telegram:<chat id>``. The skill's ``skill.toml``
asks for it (``[capabilities] notify = true``) and the operator grants each destination
(``skills.grants.<skill>.notify``). Failures raise :class:`skillhost.HostError` with ``kind``
``denied``, ``invalid``, ``unavailable`` or ``failed``.
"""

from ._errors import call


def send(destination: str, text: str, wake: bool = False) -> None:
    """Posts ``text`` (Markdown) to ``destination``. With ``wake=True`` the agent then runs a turn
    there with ``text`` as the incoming message (on Slack, in the message's thread)."""
    from wit_world.imports import notify as raw

    call("notify", raw.send, destination, text, wake)
