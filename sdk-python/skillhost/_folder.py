"""The skill's own folder: its distributable files, read-only at ``/skill`` when its
``skill.toml`` asks ``[capabilities] files = "self"``."""

import os

#: Where the host mounts the folder.
FOLDER = "/skill"


def enter() -> None:
    """Makes the skill's folder the working directory when the host mounted it (each call
    starts in a fresh instance, in ``/``): ``os.getcwd()`` then says ``/skill``. Relative paths
    resolve in the folder either way; without the mount there is nothing to enter."""
    try:
        os.chdir(FOLDER)
    except OSError:
        pass
