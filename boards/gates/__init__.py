"""The tool-call gate (SPEC §11, §13): which of an agent's own tool calls need a person.

``shell`` reads a shell line as the shell would; ``matching`` reads a call and finds the
gate rule that decides it (pure functions, no database); ``rules`` keeps a board's gate
rules (added, changed, moved, removed, tested, given to new boards), each change one of
the core's units of work.
"""
