"""The product's URLs and the bench's echo view (the HTTP half of the push floor)."""

from django.urls import path

from kanban.urls import urlpatterns as board_urlpatterns

from .echo import echo

urlpatterns = [*board_urlpatterns, path("bench/echo/", echo)]
