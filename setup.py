"""The packages of the wheel: the ones found here, plus the top-level ``templates/`` and
``static/`` folders installed inside the kanban package (``kanban/templates``,
``kanban/static``), where ``kanban.settings`` looks for them when no checkout is around.

Everything else about the package is in pyproject.toml; this file exists because
pyproject's ``[tool.setuptools]`` can either find packages or list them, and a package at
another folder (``package-dir``) needs the list.
"""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(
            include=["kanban", "kanban.*", "boards", "boards.*", "devtools", "devtools.*"]
        ),
        "kanban.templates",
        "kanban.static",
    ],
    package_dir={"kanban.templates": "templates", "kanban.static": "static"},
)
