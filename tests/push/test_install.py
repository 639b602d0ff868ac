"""The installable board (SPEC §14): a manifest, a service worker at the origin's root,
and the QR code ``up`` prints."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.staticfiles import finders
from django.test import Client

from boards.management.commands.up import qr_text


def test_the_manifest_names_the_app_with_icons_and_a_start_page(db):
    response = Client().get("/manifest.webmanifest")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/manifest+json"
    manifest = json.loads(response.content)
    assert manifest["name"] == "Agent Kanban"
    assert manifest["start_url"] == "/inbox/"
    assert manifest["display"] == "standalone"
    assert manifest["theme_color"]
    sizes = {icon["sizes"] for icon in manifest["icons"] if icon["type"] == "image/png"}
    assert {"192x192", "512x512"} <= sizes
    for icon in manifest["icons"]:
        name = icon["src"].removeprefix(settings.STATIC_URL)
        assert finders.find(name), icon


def test_the_service_worker_is_served_from_the_root_for_the_whole_board(db):
    response = Client().get("/sw.js")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert response["Service-Worker-Allowed"] == "/"
    assert response["Cache-Control"] == "no-cache"
    body = response.content.decode()
    assert 'addEventListener("push"' in body and "notificationclick" in body


def test_every_page_links_the_manifest_and_registers_the_worker(person_client):
    page = person_client.get("/boards/").content.decode()
    assert 'rel="manifest" href="/manifest.webmanifest"' in page
    assert "push.js" in page


def test_the_service_worker_refuses_a_post(db):
    assert Client().post("/sw.js").status_code == 405


def test_up_draws_the_public_url_as_a_qr_code():
    drawn = qr_text("https://kanban.example")
    lines = drawn.strip("\n").split("\n")
    assert len(lines) > 10
    assert len({len(line) for line in lines}) == 1  # a square, line by line
