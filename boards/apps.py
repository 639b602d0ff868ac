from django.apps import AppConfig
from django.db.models.signals import post_migrate


class BoardsConfig(AppConfig):
    name = "boards"
    verbose_name = "Agent Kanban boards"

    def ready(self) -> None:
        # Imported once the apps are loaded (both use the models):
        # - events: its receivers close sockets on logout and when a person's access
        #   changes, in any process that changes users (the admin site, a shell);
        # - delivery: it sends the webhook deliveries a write records, in any process that
        #   writes (a server, a command, a shell); the outbox wakes it after commit.
        from boards.clients import registry
        from boards.core import events, fulltext, services
        from boards.gates import matching
        from boards.gates import rules as gaterules
        from boards.push import notices
        from boards.web import rendering
        from boards.webhooks import delivery

        delivery.install()
        # What waits for a person reaches their devices (Web Push), from any process.
        events.on_needs_change(notices.wake)
        # The write path publishes a board's update; the web renders it.
        events.install_renderer(rendering.render_update)
        # A new board starts with the gate's default rules; the gate knows the coding
        # clients by their rows (their folders, tool names, processes). Both sit above
        # what calls them, so they are handed in here.
        services.install_board_defaults(gaterules.gate_rules_default)
        matching.install_clients(registry.gate_facts())
        matching.warm()
        # SQLite's search triggers go with a table a migration rebuilds: put them back.
        post_migrate.connect(fulltext.after_migrate, sender=self)
