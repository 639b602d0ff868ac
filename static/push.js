// The installable board (SPEC §14): registers the service worker on every page, and on
// the person's page turns on pushes for this device and registers passkeys.
(function () {
  "use strict";

  if (!("serviceWorker" in navigator)) return;
  var ready = navigator.serviceWorker.register("/sw.js", { scope: "/" });
  window.kanbanServiceWorker = ready;

  function csrf() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers:inherited") || "{}")["X-CSRFToken"];
    } catch (e) {
      return "";
    }
  }

  function say(text) {
    var note = document.getElementById("push-status");
    if (note) note.textContent = text;
  }

  function fromBase64url(text) {
    var padded = text.replace(/-/g, "+").replace(/_/g, "/");
    padded += "===".slice((padded.length + 3) % 4);
    var raw = atob(padded);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  function postJson(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify(body),
    });
  }

  function subscribe(button) {
    if (!("PushManager" in window)) {
      say("This browser cannot receive pushes (it needs HTTPS, or an installed app on iOS).");
      return;
    }
    Notification.requestPermission()
      .then(function (granted) {
        if (granted !== "granted") throw new Error("Notifications are not allowed.");
        return Promise.all([ready, fetch("/api/push/key").then(function (r) { return r.json(); })]);
      })
      .then(function (both) {
        return both[0].pushManager.subscribe({
          userVisibleOnly: true,
          applicationServerKey: fromBase64url(both[1].publicKey),
        });
      })
      .then(function (subscription) {
        var body = subscription.toJSON();
        body.name = (document.getElementById("push-name") || {}).value || "";
        return postJson(button.dataset.url, body);
      })
      .then(function (reply) {
        if (reply.status !== 201) throw new Error("The board refused this device.");
        window.location.reload();
      })
      .catch(function (error) {
        say(error.message || String(error));
      });
  }

  function answer(reply) {
    return reply.json().then(function (body) {
      if (!reply.ok) throw new Error((body.error && body.error.message) || "Refused");
      return body;
    });
  }

  // A passkey for step-up approvals (WebAuthn's JSON forms: the options the board sends
  // and the credential it checks). The board asks a proof with the new one: an assertion
  // from a passkey the person has (made first, for this add), or their password for the
  // first one.
  function addPasskey(button) {
    var status = document.getElementById("passkey-status");
    var password = document.getElementById("passkey-password");
    var proof = {};
    postJson(button.dataset.options, {})
      .then(answer)
      .then(function (options) {
        var proven = options.confirm
          ? navigator.credentials
              .get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.confirm) })
              .then(function (assertion) {
                proof.assertion = assertion.toJSON();
              })
          : Promise.resolve().then(function () {
              if (!password || !password.value) {
                throw new Error("Enter your password to add your first passkey.");
              }
              proof.password = password.value;
            });
        return proven.then(function () {
          return navigator.credentials.create({
            publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.create),
          });
        });
      })
      .then(function (credential) {
        var name = (document.getElementById("passkey-name") || {}).value || "";
        proof.name = name;
        proof.credential = credential.toJSON();
        return postJson(button.dataset.url, proof);
      })
      .then(answer)
      .then(function () {
        window.location.reload();
      })
      .catch(function (error) {
        if (status) status.textContent = error.message || String(error);
      });
  }

  // Removing a passkey: an assertion made for this removal goes with the form (the last
  // one's form also takes the password instead, and then needs no ceremony).
  function removePasskey(form) {
    var status = document.getElementById("passkey-status");
    var password = form.querySelector("input[name=password]");
    if (password && password.value) {
      form.submit();
      return;
    }
    var id = parseInt(form.querySelector("input[name=passkey]").value, 10);
    postJson(form.dataset.options, { remove: id })
      .then(answer)
      .then(function (options) {
        return navigator.credentials.get({
          publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.confirm),
        });
      })
      .then(function (assertion) {
        form.querySelector("input[name=assertion]").value = JSON.stringify(assertion.toJSON());
        form.submit();
      })
      .catch(function (error) {
        if (status) status.textContent = error.message || String(error);
      });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest ? event.target.closest("form.passkey-remove") : null;
    if (!form) return;
    event.preventDefault();
    removePasskey(form);
  });

  // Confirm one step-up item (``call-12``, ``task-3``) with a passkey: the board then
  // lets this person approve it, from anywhere, for a few minutes.
  function stepUp(slug, item) {
    var base = "/boards/" + encodeURIComponent(slug) + "/step-up/";
    return postJson(base + "options", { item: item })
      .then(answer)
      .then(function (options) {
        return navigator.credentials.get({
          publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options),
        });
      })
      .then(function (credential) {
        return postJson(base, { credential: credential.toJSON() });
      })
      .then(answer);
  }
  window.kanbanStepUp = stepUp;

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : null;
    if (!target) return;
    var button = target.closest("#push-enable");
    if (button) {
      event.preventDefault();
      subscribe(button);
      return;
    }
    button = target.closest("#passkey-add");
    if (button) {
      event.preventDefault();
      addPasskey(button);
    }
  });

  // Why a step-up approval did not go through, beside its button.
  function refused(button, text) {
    var form = button.closest("form") || button.parentNode;
    var note = form.querySelector(".step-up-refused");
    if (!note) {
      note = document.createElement("p");
      note.className = "step-up-refused";
      note.setAttribute("role", "alert");
      form.appendChild(note);
    }
    note.textContent = text;
  }

  // The button now on the page for the same item and action as ``button``, or null.
  function sameButton(button) {
    var action = button.getAttribute("formaction") || button.getAttribute("hx-post") || "";
    var found = null;
    document.querySelectorAll("[data-step-up-item]").forEach(function (other) {
      if (found || other.dataset.stepUpItem !== button.dataset.stepUpItem) return;
      if ((other.getAttribute("formaction") || other.getAttribute("hx-post") || "") === action) {
        found = other;
      }
    });
    return found;
  }

  // A step-up item's Approve (``data-step-up-item``): for a person with a passkey (the
  // page's ``data-passkey``; the strip's fragments are the same for every viewer) the
  // assertion for that item comes first, then the click goes on as it would have (htmx's
  // request, or the form's submit). Listened for in the capture phase, before htmx's
  // own listener on the button, so the approval is never sent ahead of the passkey.
  document.addEventListener(
    "click",
    function (event) {
      var button = event.target.closest ? event.target.closest("[data-step-up-item]") : null;
      if (!button || !document.body.hasAttribute("data-passkey")) return;
      if (button.dataset.stepUpConfirmed) {
        delete button.dataset.stepUpConfirmed;
        return;
      }
      event.preventDefault();
      event.stopPropagation();
      if (button.getAttribute("aria-busy") === "true") return;
      button.setAttribute("aria-busy", "true");
      stepUp(button.dataset.stepUpBoard, button.dataset.stepUpItem)
        .then(function () {
          button.removeAttribute("aria-busy");
          // A push may have replaced the strip during the ceremony (the step-up is itself
          // recorded and pushed): the click goes to the button that shows now.
          var live = button.isConnected ? button : sameButton(button);
          if (!live) return;
          live.dataset.stepUpConfirmed = "1";
          live.click();
        })
        .catch(function (error) {
          button.removeAttribute("aria-busy");
          refused(button, "Not approved: your passkey did not confirm it (" +
            (error.message || String(error)) + "). Deny needs none.");
        });
    },
    true
  );
})();
