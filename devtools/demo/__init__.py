"""A simulated team of agents working a plan on a running board (``manage.py demo``).

An orchestrator plans a software project ("Ship the billing page") in one
``TaskBatch``; N workers claim ready tasks, work on them (a wait scaled by the
speed), complete them or now and then fail them, ask a person before the one
approval-gated step, and read the messages people send them. The agents talk to
the running server only through the HTTP tool API (JSON, a real token), exactly as
separate agent processes would; nothing they do touches the database directly.

``plan`` holds the project; ``team`` the agents, how they read the board, and the
closing summary. The command (``devtools/management/commands/demo.py``) parses the
options, issues the team's token and prints.
"""
