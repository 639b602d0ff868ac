from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """The developers' management commands (``bench``, ``demo``, ``makehistory``)."""

    name = "devtools"
    verbose_name = "Agent Kanban developer tools"
