"""Tools for developing Agent Kanban, kept out of the product (``boards``, ``kanban``).

- ``liveserver``: the live-server harness (daphne processes on one database), used by
  the tests, ``bench`` and ``demo``;
- ``bench``: ``manage.py bench``, the speed measurements, one module per scenario;
- ``demo``: ``manage.py demo``, a simulated agent team working a plan on a running board;
- ``manage.py makehistory``: weeks of finished history on a board (``bench --scale``).

No product module imports this package (the import-linter contract in pyproject.toml).
"""
