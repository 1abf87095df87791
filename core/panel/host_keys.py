"""SSH host keys pinned per service: the first ssh clone of a service's repository pins
the host key the server showed, and every later clone must be shown that key.

What a service keeps (``Service.ssh_host_key``) is the key itself, as OpenSSH writes it
in a known-hosts file without the host name: ``<type> <base64 blob>`` (for example
``ssh-ed25519 AAAAC3...``). The clone needs the key, not only its fingerprint: it writes
a known-hosts file holding that key alone and has ssh check it strictly. What the API
shows (the detail's ``ssh_host_key``) is the key's fingerprint as ``ssh-keygen -l``
prints it (``SHA256:`` and the unpadded base64 of the SHA-256 of the blob), or null
until the first ssh clone (and always for services that clone over https or not at all).

Decisions:

- The pin is recorded by the deploy job after its clone, in the transaction that keeps
  the compose and commit the clone gave (``core.panel.deploy_job``), never while git
  runs; a clone shown another key fails its job with ``host key changed``.
- A service's repository never changes (``git_url`` and ``ai_url`` are not patchable: a
  source field a create requires is none a PATCH takes, ``core.panel.capabilities``), so
  one pin per service is the pin of its remote.
- ``PATCH`` takes ``ssh_host_key: null`` only, which forgets the pin (the next clone
  pins what it is shown); any other value is 422 on ``ssh_host_key``: a key is learned
  from the server, never given by the customer.
- The published keys of github.com, gitlab.com and bitbucket.org ship with Slipway
  (``plugins/source_common/known_hosts``) and are the keys of those hosts from the first
  clone.
"""
from __future__ import annotations

import base64
import binascii
import re

from core.panel.deploy_keys import fingerprint

FIELD = "ssh_host_key"
_KEY_TYPE = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
                       r"sk-ecdsa-sha2-nistp256@openssh\.com|ssh-dss)$")


def key_of(text: str | None) -> str | None:
    """The ``<type> <base64>`` key of one known-hosts or public-key line (``[host]
    <type> <base64> [comment]``, a marker such as ``@revoked`` not accepted), or None
    when ``text`` holds no such key."""
    if not text:
        return None
    words = text.split()
    if words and words[0].startswith("@"):
        return None
    for i, word in enumerate(words[:-1]):
        if _KEY_TYPE.match(word):
            blob = words[i + 1]
            try:
                decoded = base64.b64decode(blob, validate=True)
            except (binascii.Error, ValueError):
                return None
            return f"{word} {blob}" if decoded else None
    return None


def shown(stored: str | None) -> str | None:
    """What the API shows of a pinned key: its ``SHA256:...`` fingerprint, or None."""
    key = key_of(stored)
    return fingerprint(key) if key is not None else None


def check_patch(body: dict) -> dict:
    """The problems (``{field: message}``) of a PATCH's ``ssh_host_key``: only null is
    accepted (it forgets the pin)."""
    if FIELD in body and body[FIELD] is not None:
        return {FIELD: "only null is accepted (it forgets the pinned key; the next clone pins the key the "
                       "server shows)"}
    return {}


def changed(what: str, pinned: str) -> str:
    """The job's error when a clone is shown another key than the pinned one."""
    return (f"{what} failed: host key changed: the server did not show the pinned host key {shown(pinned)}; "
            "if the server's key was replaced on purpose, PATCH ssh_host_key to null and deploy again")

