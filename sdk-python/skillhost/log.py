"""Structured logging to the host's log (capped per call): ``log.info("fetched", url=url)``."""

from typing import Any


def log(level: str, message: str, **fields: Any) -> None:
    """Writes one record; ``level`` is ``debug``, ``info``, ``warn`` or ``error``."""
    from wit_world.imports import log as raw

    raw.log(raw.Level[level.upper()], message, [(k, str(v)) for k, v in fields.items()])


def debug(message: str, **fields: Any) -> None:
    """A record for whoever debugs the skill."""
    log("debug", message, **fields)


def info(message: str, **fields: Any) -> None:
    """Normal progress."""
    log("info", message, **fields)


def warn(message: str, **fields: Any) -> None:
    """Something unexpected that the skill handled."""
    log("warn", message, **fields)


def error(message: str, **fields: Any) -> None:
    """Something failed."""
    log("error", message, **fields)
