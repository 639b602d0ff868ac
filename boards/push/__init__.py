"""Reaching a person away from the board (SPEC §14): Web Push to their devices, the
one-time links a notification's Approve and Deny post to, and passkeys for step-up.

- ``keys``: the board's VAPID key pair, made once and kept in the database;
- ``devices``: a person's push subscriptions (subscribe, remove, gone endpoints);
- ``notices``: which Needs-you items each device was told of, pushed and withdrawn
  through the webhooks' background queue, with the webhooks' egress rules;
- ``links``: the one-time action links;
- ``passkeys``: WebAuthn registration and the step-up assertions.
"""
