"""The board's side of runs (SPEC §16): runners and their presence, a run of a card
(``TaskRun`` and the panel's Run…), its conversation, its diff, and the person's review
(Reply, Merge, Discard, Stop).

A run owns its card through the one state machine (``boards.core.services.lifecycle``):
the card is in progress under ``<client>@<runner>`` with a lease the runner renews, and
its attempts are its runs. A runner's session is gated as any other (``boards.clients``
sessions, ``boards.gates``), and its client's own permission requests are answered by
the same gate. Its items (``review``, a session waiting with the agent's last message)
are Needs-you items read by ``boards.needs``.

This part sits above the clients, the agents' door and the gate (it links a run's
session and answers through the gate) and below push and the pages, which show and
push what it records. The program people run is ``boards.runner``, which imports
nothing of this.
"""
