from django.urls import path

from boards.web import consumers

websocket_urlpatterns = [
    path("ws/boards/<slug:slug>/", consumers.BoardConsumer.as_asgi()),
    path("ws/boards/<slug:slug>/activity/", consumers.ActivityConsumer.as_asgi()),
    path("ws/inbox/", consumers.InboxConsumer.as_asgi()),
]
