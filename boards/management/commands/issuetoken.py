from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.core import selectors, services
from boards.core.errors import ServiceError

# ``--runner`` given without a name: the positional name is the runner's.
NAMED_FIRST = "\x00named"


class Command(BaseCommand):
    help = "Issue an API token for an agent on a board; prints the token alone on stdout."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "agent",
            nargs="?",
            default="",
            help="agent name (for --team: a label, requests send X-Agent)",
        )
        parser.add_argument(
            "--team", action="store_true", help="a team token: each request names its agent"
        )
        parser.add_argument(
            "--admin",
            action="store_true",
            help="an admin-scoped token: reads the board's event log, calls no tools",
        )
        parser.add_argument(
            "--orchestrator",
            action="store_true",
            help="may take over in-progress work other tokens' agents hold (reassign, owner)",
        )
        parser.add_argument(
            "--runner",
            nargs="?",
            const=NAMED_FIRST,
            default="",
            metavar="NAME",
            help="a runner's token (agent-kanban runner): registers the runner NAME and "
            "reports its own runs, calls no tools and decides nothing",
        )

    def handle(
        self,
        *args: object,
        slug: str,
        agent: str,
        team: bool,
        admin: bool,
        orchestrator: bool,
        runner: str,
        **options: object,
    ) -> None:
        if runner and runner != NAMED_FIRST:
            if agent:
                raise CommandError(f"Name the runner once: {agent!r} or --runner {runner!r}")
            agent = runner
        if not agent and not (team or admin):
            raise CommandError("Name the agent (or the runner: --runner NAME)")
        try:
            board = selectors.board_get(slug)
            token = services.token_issue(
                board=board,
                agent=agent,
                team=team,
                admin=admin,
                orchestrator=orchestrator,
                runner=bool(runner),
                created_by="issuetoken",
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(token)
