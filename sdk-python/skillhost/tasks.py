"""Going on as a task of the MCP Tasks extension: a tool that the module's ``task_support()``
marks ``"detaches"`` gathers what it needs first (its :mod:`skillhost.ask` rounds travel in the
call's own results), then calls ``tasks.detach()``: the client gets the task at once, and the
tool goes on in the background (its later rounds are the task's input requests; its result is
the task's)."""


def detach() -> bool:
    """Goes on as a task; ``False`` where the call cannot (the client did not declare the
    extension, the tool is not marked to detach, outside MCP, or a second time): the call then
    goes on as it is."""
    from wit_world.imports import tasks as raw

    return raw.detach()
