// The board's service worker (SPEC §14), served from the origin's root so its scope is
// the whole board. It shows what the board pushes, closes what the board withdraws, and
// answers a notification's Approve or Deny by posting its one-time link.
"use strict";

self.addEventListener("install", function () {
  self.skipWaiting();
});

self.addEventListener("activate", function (event) {
  event.waitUntil(self.clients.claim());
});

function closeTagged(tag) {
  return self.registration.getNotifications({ tag: tag }).then(function (shown) {
    shown.forEach(function (n) {
      n.close();
    });
  });
}

self.addEventListener("push", function (event) {
  var data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (e) {
    data = { title: "Agent Kanban", body: event.data ? event.data.text() : "" };
  }
  if (data.withdraw) {
    event.waitUntil(closeTagged(data.tag));
    return;
  }
  var actions = (data.actions || []).slice(0, 2);
  event.waitUntil(
    self.registration.showNotification(data.title || "Agent Kanban", {
      body: data.body || "",
      tag: data.tag,
      renotify: true,
      requireInteraction: true,
      icon: "{{ icon }}",
      data: { url: data.url || "/inbox/", actions: actions },
      actions: actions.map(function (a) {
        return { action: a.action, title: a.title };
      }),
    })
  );
});

function openUrl(url) {
  return self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (open) {
    for (var i = 0; i < open.length; i++) {
      if (open[i].url === url && "focus" in open[i]) return open[i].focus();
    }
    return self.clients.openWindow(url);
  });
}

self.addEventListener("notificationclick", function (event) {
  var note = event.notification;
  var data = note.data || {};
  note.close();
  var chosen = (data.actions || []).filter(function (a) {
    return a.action === event.action;
  })[0];
  if (!chosen) {
    event.waitUntil(openUrl(data.url || "/inbox/"));
    return;
  }
  // The link is the credential (one-time, bound to the item): no cookie is needed, and
  // an answer other than 2xx (decided elsewhere, expired, needs a passkey) opens the item.
  // Its secret is in the fragment (``#t=…``), which no request carries: it goes in the
  // body, so it never lands in an access log.
  var link = new URL(chosen.url);
  var secret = new URLSearchParams(link.hash.slice(1)).get("t") || "";
  link.hash = "";
  event.waitUntil(
    fetch(link.href, {
      method: "POST",
      credentials: "omit",
      body: new URLSearchParams({ token: secret }),
    })
      .then(function (reply) {
        if (!reply.ok) return openUrl(data.url || "/inbox/");
      })
      .catch(function () {
        return openUrl(data.url || "/inbox/");
      })
  );
});
