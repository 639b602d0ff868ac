"""``manage.py bench``: the board's speed, measured on servers the benchmark starts itself.

One module per scenario (``calls``, ``push``, ``render``, ``race``, ``scale``, ``graph``);
``runs`` puts them together on SQLite and on PostgreSQL + Redis, ``report`` prints the
tables. The servers bench starts serve ``devtools.bench.asgi`` with
``devtools.bench.settings``: the product's application plus the echo routes that give
the push figures their floor (``echo``); a production server has no such routes.
"""
