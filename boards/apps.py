from django.apps import AppConfig


class BoardsConfig(AppConfig):
    name = "boards"
    verbose_name = "Agent Kanban boards"

    def ready(self) -> None:
        # Its receivers close sockets on logout and when a person's access changes, in
        # any process that changes users (the admin site, a shell), not only the server.
        from . import events  # noqa: F401
