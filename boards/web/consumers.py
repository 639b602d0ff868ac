"""The board's WebSocket: forwards rendered fragments of its board's changes.

Consumers never write. They authenticate, join the board's group, and on
(re)connect send what the browser missed since the sequence it names. They close
when their person logs out, or loses the board or their account (``events.user_group``).
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth import get_user_model
from django.http import QueryDict

from boards.core import events, numbers, permissions, selectors
from boards.core.errors import ServiceError
from boards.models import Board, Task
from boards.needs.inbox import inbox_count, inbox_items
from boards.web import rendering
from boards.web.filters import BoardFilter, activity_filters, board_filter
from boards.web.rendering import (
    activity_push,
    card_gone,
    filtered_count_parts,
    header_context,
    header_parts,
    inbox_parts,
    push_marker,
)

# Close codes in the 4xxx range make the browser's extension give up instead of reconnecting.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_RETRY = 1011  # the server could not go on; the page reconnects
CLOSE_BAD_REQUEST = 4400  # a filter the page could not have asked for: no retry


def _board_for(user: object, slug: str) -> Board | None:
    board = Board.objects.filter(slug=slug).first()
    if board is None or permissions.role_of(user, board) is None:
        return None
    return board


def _refusal_now(user_id: int, board_id: int) -> int | None:
    """The close code a new socket of this person on this board would get now (the
    account gone or deactivated: 4401; the board gone or not theirs: 4404), or None."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not user.is_active:
        return CLOSE_UNAUTHENTICATED
    board = Board.objects.filter(pk=board_id).first()
    if board is None or permissions.role_of(user, board) is None:
        return CLOSE_NOT_FOUND
    return None


class PersonSocket(AsyncWebsocketConsumer):
    """A logged-in person's socket: it hears their account and login session
    (``events.user_group`` / ``session_group``), closes when either ends, and only
    pushes (anything a client sends is a protocol error). Subclasses add the groups
    of what they show (``joined``)."""

    user_id: int
    ended = False
    chosen: BoardFilter | None = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.joined: list[str] = []

    async def join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.append(group)

    async def join_person(self) -> bool:
        """Join the person's groups; False (and closed, 4401) for nobody logged in.

        Joined before access is checked: a removal that commits in between is heard
        (messages wait until connect returns, then the socket checks again)."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return False
        self.user_id = user.pk
        await self.join(events.user_group(user.pk))
        session = self.scope.get("session")
        if session and session.session_key:
            await self.join(events.session_group(session.session_key))
        return True

    async def _leave(self) -> None:
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []

    async def _end(self, code: int) -> None:
        """Close with ``code`` (4xxx: the page does not reconnect) and forward nothing more."""
        if self.ended:
            return
        self.ended = True
        await self._leave()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        await self._leave()

    async def session_ended(self, message: dict) -> None:
        """Its person logged out: the socket stops here (the page shows it down)."""
        await self._end(CLOSE_UNAUTHENTICATED)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await self.close(code=CLOSE_BAD_REQUEST)

    async def access_changed(self, message: dict) -> None:
        """Its person was taken off a board, or their account deactivated or deleted: the
        socket closes if it would be refused now, with the code it would be refused with."""
        board_id = getattr(self, "board_id", None)
        if self.ended or board_id is None:
            return
        if message.get("board") not in (None, board_id):
            return
        try:
            code = await database_sync_to_async(_refusal_now)(self.user_id, board_id)
        except Exception:
            # Access could not be confirmed: stop rather than leak, with a code the page
            # reconnects after (its reconnection is checked like any other).
            code = CLOSE_RETRY
        if code is not None:
            await self._end(code)


class BoardConsumer(PersonSocket):
    board_id: int

    async def connect(self) -> None:
        if not await self.join_person():
            return
        slug = self.scope["url_route"]["kwargs"]["slug"]
        board = await database_sync_to_async(_board_for)(self.scope["user"], slug)
        if board is None:  # no such board, or the person is not a member: the same answer
            await self._end(CLOSE_NOT_FOUND)
            return
        self.board_id = board.pk
        self.card_seq: dict[str, int] = {}
        self.header_sent: dict[str, tuple[int, str]] = {}
        self.sent_seq = 0
        self.floor = -1
        await self.join(events.group_name(board.pk))
        await self.accept()
        await self.catch_up(board)

    async def catch_up(self, board: Board) -> None:
        raw = self.scope.get("query_string", b"").decode(errors="replace")
        query = parse_qs(raw)
        # The page's search and filters, which its socket URL carries: cards they no longer
        # keep are taken off the page, counts say how many they keep.
        chosen = board_filter(QueryDict(raw))
        self.chosen = chosen if chosen.filter else None
        since = numbers.spelled(query.get("seq", [""])[0], numbers.SEQ_DIGITS)
        if since is None:
            since = -1
        self.sent_seq = max(since, 0)
        message = await database_sync_to_async(self._missed)(board, since)
        if message is not None:
            await self.board_update(message)

    def _missed(self, board: Board, since: int) -> dict | None:
        board.refresh_from_db(fields=["last_seq"])
        # The page already shows the board as of ``since``: a push rendered from that state
        # or an older one (published late, or by a slower process) would only take it back.
        self.floor = since if 0 <= since <= board.last_seq else -1
        if since == board.last_seq:
            # The page is current: remember its header so the first push sends only changes.
            parts = header_parts(header_context(board))
            self.header_sent = {key: (since, html) for key, html in parts.items()}
            return None
        if since < 0 or since > board.last_seq:
            return self._rendered(
                rendering.render_update(board.pk, (), full=True, chosen=self.chosen)
            )
        numbers, full = events.missed_numbers(board, since)
        return self._rendered(
            rendering.render_update(board.pk, numbers, full=full, chosen=self.chosen)
        )

    def _rendered(self, message: dict) -> dict:
        message["filtered"] = True  # its full board (if any) already keeps to the filters
        return message

    def _kept(self, message: dict) -> dict:
        """A board update as this socket's filters show it: the full board re-rendered with
        them, a card they no longer keep deleted instead of placed, their counts."""
        board = Board.objects.filter(pk=self.board_id).first()
        if board is None or self.chosen is None:
            return message
        kept = dict(message)
        if message.get("full") and not message.get("filtered"):
            kept["full"] = rendering.render_update(board.pk, (), full=True, chosen=self.chosen)[
                "full"
            ]
        cards = message.get("cards") or {}
        if cards:
            rows = Task.objects.filter(board=board, number__in=[int(n) for n in cards])
            keep = set(self.chosen.filter.apply(rows).values_list("number", flat=True))
            kept["cards"] = {
                n: html if int(n) in keep else card_gone(n) for n, html in cards.items()
            }
        if cards or message.get("header"):
            # A changed card may enter or leave the filters without the board's own counts
            # changing: the counts they keep go with every card (sent only when changed).
            # Columns' first pages are the board's, not the filters': a filtered page
            # keeps its own (and its "Show more", which carries the filters).
            header = {
                part: html
                for part, html in (message.get("header") or {}).items()
                if not part.startswith(("page-", "more-"))
            }
            if "label-filter" in header:
                header["label-filter"] = rendering.label_filter_part(board, self.chosen)
            kept["header"] = {
                **header,
                **filtered_count_parts(board, self.chosen.filter),
            }
        return kept

    async def board_update(self, message: dict) -> None:
        if self.ended:
            return  # (already in this socket's queue when it was told to stop)
        label = message["seq"]
        if message.get("events") and label <= self.floor:
            return  # (a push without events, the roster or a lease renewal, has no seq of its own)
        if self.chosen is not None:
            message = await database_sync_to_async(self._kept)(message)
        parts = []
        if message.get("full"):
            parts.append(message["full"])
            self.header_sent = {}
            self.card_seq = {}
        for number, html in message.get("cards", {}).items():
            # Drop a fragment that arrives after a newer render of the same card.
            if self.card_seq.get(number, -1) <= label:
                self.card_seq[number] = label
                parts.append(html)
        for part_id, html in (message.get("header") or {}).items():
            # Unchanged header parts are not resent: a person typing a deny note in the
            # approvals strip keeps it while other cards move.
            seen_seq, seen_html = self.header_sent.get(part_id, (-1, ""))
            if label >= seen_seq and html != seen_html:
                self.header_sent[part_id] = (label, html)
                parts.append(html)
        if not parts and not message.get("events"):
            return  # nothing new to show, and nothing to announce
        self.sent_seq = max(self.sent_seq, label)
        # Every push replaces the events list: it holds exactly this push's events.
        parts.insert(0, push_marker(self.sent_seq, message.get("events") or []))
        await self.send(text_data="".join(parts))


class ActivityConsumer(PersonSocket):
    """The activity page's socket, ``/ws/boards/<slug>/activity/?<filters>&after=<seq>``:
    the rows its filters keep that are newer than ``after``, at once and after each change
    of the board, rendered with the page's own partial (``activity.html#push``: on top of
    the table, with the address that resumes after them). Each push re-reads the log, so
    events that arrive out of order or while it renders are not lost."""

    board_id: int
    after: int
    filters: dict
    query: QueryDict

    async def connect(self) -> None:
        if not await self.join_person():
            return
        slug = self.scope["url_route"]["kwargs"]["slug"]
        board = await database_sync_to_async(_board_for)(self.scope["user"], slug)
        if board is None:
            await self._end(CLOSE_NOT_FOUND)
            return
        self.query = QueryDict(self.scope.get("query_string", b"").decode(errors="replace"))
        try:
            self.filters = activity_filters(self.query)
            after = numbers.digits(
                self.query.get("after", ""), field="after", max_digits=numbers.SEQ_DIGITS
            )
        except ServiceError:
            await self._end(CLOSE_BAD_REQUEST)
            return
        self.board_id = board.pk
        self.after = board.last_seq if after is None else after
        self.lock = asyncio.Lock()
        await self.join(events.group_name(board.pk))
        await self.accept()
        await self._push()

    async def board_update(self, message: dict) -> None:
        if not self.ended and message.get("events"):
            await self._push()

    async def _push(self) -> None:
        # One read at a time: two overlapping ones would send the same rows twice.
        async with self.lock:
            html = await database_sync_to_async(self._rows)()
            if html and not self.ended:
                await self.send(text_data=html)

    def _rows(self) -> str:
        board = Board.objects.filter(pk=self.board_id).first()
        if board is None:
            return ""
        # (A page returning after a long break gets the first ACTIVITY_MAX it missed; the
        # next change brings the rest.)
        rows = selectors.activity_page(
            board, after=self.after, limit=selectors.ACTIVITY_MAX, **self.filters
        )
        if not rows:
            return ""
        self.after = rows[-1].seq
        resume = self.query.copy()
        resume["after"] = str(self.after)
        rows.reverse()  # newest first, as the table shows them
        return activity_push(board, rows, f"{self.scope['path']}?{resume.urlencode()}")


def _inbox_html(user_id: int, count_only: bool) -> tuple[frozenset[int], int, str]:
    """The boards this person's inbox hears, the newest board's id (any board made later
    may be theirs too), and the inbox's rendering now."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return frozenset(), 0, ""
    newest = Board.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    boards = frozenset(board.pk for board in permissions.acting_boards(user))
    items = inbox_items(user)
    return boards, newest, inbox_parts(items, user, count_only=count_only, count=inbox_count(user))


class InboxConsumer(PersonSocket):
    """One socket for everything that waits for a person, on all their boards (SPEC §12):
    the inbox page's list (``/ws/inbox/``), or the count every page's header shows
    (``?count=1``). Every board's header change is announced to all inboxes (a small
    message, ``events.INBOXES_GROUP``); each re-renders when the board is the person's,
    and changes that arrive while it renders are rendered once after."""

    boards: frozenset[int] = frozenset()
    newest = 0
    sent = ""
    pending: asyncio.Future | None = None
    again = False

    async def connect(self) -> None:
        if not await self.join_person():
            return
        query = parse_qs(self.scope.get("query_string", b"").decode(errors="replace"))
        self.count_only = query.get("count", [""])[0] == "1"
        await self.join(events.INBOXES_GROUP)
        await self.accept()
        await self.refresh()

    async def refresh(self) -> None:
        """Render now (a change that arrives meanwhile renders once more after)."""
        self.boards, self.newest, html = await database_sync_to_async(_inbox_html)(
            self.user_id, self.count_only
        )
        if html and html != self.sent and not self.ended:
            self.sent = html
            await self.send(text_data=html)

    async def _refresh_soon(self) -> None:
        while True:
            self.again = False
            await self.refresh()
            if not self.again:
                return

    async def board_changed(self, message: dict) -> None:
        """A board's header changed (``events``): re-render when it is one of this person's
        boards, or one not seen before (it may have become theirs)."""
        board = message.get("board") or 0
        if self.ended or (board not in self.boards and board <= self.newest):
            return
        if self.pending is not None and not self.pending.done():
            self.again = True
            return
        self.pending = asyncio.ensure_future(self._refresh_soon())

    async def access_changed(self, message: dict) -> None:
        if self.ended:
            return
        if await database_sync_to_async(_refusal_now_anywhere)(self.user_id):
            await self._end(CLOSE_UNAUTHENTICATED)
            return
        await self.refresh()  # boards gained or lost: listen to the ones left

    async def _leave(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
        await super()._leave()


def _refusal_now_anywhere(user_id: int) -> bool:
    user = get_user_model().objects.filter(pk=user_id).first()
    return user is None or not user.is_active
