"""``agent-kanban``: every management command under one name, from any folder.

``agent-kanban up`` is ``python manage.py up`` without the checkout: the command sets
its own settings module, so an installed wheel needs nothing else. ``agent-kanban help``
lists the commands; ``agent-kanban --version`` names the installed version.
"""

import os
import sys
from importlib.metadata import PackageNotFoundError, version

PROGRAM = "agent-kanban"


def installed_version() -> str:
    try:
        return version("agent-kanban")
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments in (["--version"], ["-V"]):
        # Django would answer with its own version.
        print(f"{PROGRAM} {installed_version()}")
        return
    # Always ours: a DJANGO_SETTINGS_MODULE left in the shell for another project would
    # start this board on that project's settings (`--settings` still chooses).
    os.environ["DJANGO_SETTINGS_MODULE"] = "kanban.settings"
    from django.core.management import execute_from_command_line

    # Django names the program after argv[0] in its help ("agent-kanban help <subcommand>").
    execute_from_command_line([PROGRAM, *arguments])


if __name__ == "__main__":
    main()
