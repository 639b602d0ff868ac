"""Settings of the servers ``manage.py bench`` starts: the product's, with the bench's URLs."""

from kanban.settings import *  # noqa: F403

ROOT_URLCONF = "devtools.bench.urls"
