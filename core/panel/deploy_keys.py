"""Deploy keys: Ed25519 key pairs Slipway makes for a customer, whose public half the
customer adds to a private repository (GitHub's, GitLab's... "deploy key") and whose
private half the ``ssh`` clones of the services naming the key use, and nothing else.

A key is ``{id (dk_...), name, customer_id, public_key, fingerprint, created_at}``; the
fingerprint is what ``ssh-keygen -l`` prints (``SHA256:`` and the unpadded base64 of the
SHA-256 of the key blob). The private half (OpenSSH format) is handed to the repository
when the key is made and kept there encrypted with ``SLIPWAY_SECRET_KEY`` (the storage
adapter seals it as it seals secret variables); it is never answered, logged or put into
an event. Only a deploy job reads it back (``uow.deploy_keys.private_key``), wrapped in a
:class:`PrivateKey` whose ``repr`` hides it, and the clone writes it to a file of the
job's private work folder for the clone only.

Decisions:

- Every operation needs ``services:deploy``; a customer's principal sees and names its
  own customer's keys only (another customer's key is 404, as its services are); an
  admin names the customer at create (``customer_id``, required), as for services.
- ``DELETE`` of a key a service still names is 409 naming those services: the user
  clears ``deploy_key_id`` (PATCH null) or deletes them first. The key row is locked by
  the transactions that name it (create, PATCH) and by the delete, so a PATCH and a
  delete racing never leave a service naming a key that is gone.
- A service names a key of its own customer only: another customer's key (or one that
  does not exist) is 422 on ``deploy_key_id``, at create and at PATCH.
- A customer's keys go with the customer (``ON DELETE CASCADE``; a customer with
  services cannot be deleted, so no service names them then).
"""
from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from core.errors import Conflict, Forbidden, Invalid, NotFound

NAME_MAX = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class DeployKey:
    id: str
    name: str
    customer_id: str
    public_key: str  # one OpenSSH line: ssh-ed25519 AAAA... slipway-<id>
    fingerprint: str  # SHA256:... as ssh-keygen -l prints it
    created_at: datetime


class PrivateKey:
    """The private half of a deploy key in the clear (OpenSSH format), for one clone.
    Its ``repr`` and ``str`` never show it (a job context or a log line holding one
    shows ``PrivateKey(dk_...)``); :attr:`text` is the key."""

    __slots__ = ("_text", "key_id")

    def __init__(self, key_id: str, text: str):
        self.key_id = key_id
        self._text = text

    @property
    def text(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"PrivateKey({self.key_id})"

    __str__ = __repr__


def new_key_pair(comment: str) -> tuple[str, str]:
    """A fresh Ed25519 pair: (public key line, private key in OpenSSH format)."""
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH).decode("ascii")
    text = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                 serialization.NoEncryption()).decode("ascii")
    return f"{public} {comment}", text


def fingerprint(public_key: str) -> str:
    """``SHA256:<base64, unpadded>`` of the key blob of an OpenSSH public key line."""
    blob = base64.b64decode(public_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def _visible(principal, key: DeployKey | None, key_id: str) -> DeployKey:
    """404 for a missing key and for one of another customer than the principal's."""
    if key is None or (principal.customer_id is not None and key.customer_id != principal.customer_id):
        raise NotFound(f"deploy key {key_id} not found")
    return key


def _name_problem(name) -> str | None:
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX or _CONTROL.search(name):
        return f"1-{NAME_MAX} characters, not blank, without control characters"
    return None


def create_key(uow, clock, principal, body: dict) -> DeployKey:
    """Make a key pair for ``body["customer_id"]`` (a customer's principal: its own,
    which it may leave out) named ``body["name"]``; the private half stored encrypted."""
    principal.require("services:deploy")
    body = body if isinstance(body, dict) else {}
    problems = {}
    why = _name_problem(body.get("name"))
    if why:
        problems["name"] = why
    customer_id = body.get("customer_id", principal.customer_id)
    if not isinstance(customer_id, str) or not customer_id:
        problems["customer_id"] = "required: the customer whose key this is"
    if problems:
        raise Invalid("invalid deploy key", fields=problems)
    if principal.customer_id is not None and customer_id != principal.customer_id:
        raise Forbidden("a customer's key makes deploy keys for its own customer only")
    key_id = f"dk_{secrets.token_hex(8)}"
    public, private = new_key_pair(f"slipway-{key_id}")
    key = DeployKey(id=key_id, name=body["name"].strip(), customer_id=customer_id, public_key=public,
                    fingerprint=fingerprint(public), created_at=clock.now())
    with uow:
        if uow.panel_customers.get(customer_id) is None:
            raise Invalid("invalid deploy key", fields={"customer_id": "no such customer"})
        uow.deploy_keys.add(key, private)
        uow.commit()
    return key


def get_key(uow, principal, key_id: str) -> DeployKey:
    principal.require("services:deploy")
    with uow:
        return _visible(principal, uow.deploy_keys.get(key_id), key_id)


def list_keys(uow, principal, *, page: int, per_page: int, customer_id: str | None = None):
    """A page of keys, oldest first; a customer's principal gets its own customer's."""
    principal.require("services:deploy")
    if principal.customer_id is not None:
        if customer_id not in (None, principal.customer_id):
            return [], 0
        customer_id = principal.customer_id
    with uow:
        return uow.deploy_keys.page(page=page, per_page=per_page, customer_id=customer_id)


def delete_key(uow, principal, key_id: str) -> None:
    """Remove the key (its private half with it); 409 naming the services that still name it."""
    principal.require("services:deploy")
    with uow:
        key = _visible(principal, uow.deploy_keys.get(key_id, for_update=True), key_id)
        users = uow.deploy_keys.users(key.id)
        if users:
            raise Conflict(f"deploy key {key.id} is used by " + ", ".join(users)
                           + "; set their deploy_key_id to null or delete them first")
        uow.deploy_keys.delete(key.id)
        uow.commit()


def check_for_service(uow, key_id, customer_id: str) -> str | None:
    """In the caller's transaction: the ``deploy_key_id`` a service create or PATCH asks
    for, checked (None clears it), its row locked; 422 on ``deploy_key_id`` unless it is
    a key of ``customer_id``."""
    if key_id is None:
        return None
    if not isinstance(key_id, str):
        raise Invalid("invalid service", fields={"deploy_key_id": "a deploy key's id (dk_...) or null"})
    key = uow.deploy_keys.get(key_id, for_update=True)
    if key is None or key.customer_id != customer_id:
        raise Invalid("invalid service", fields={"deploy_key_id": "no deploy key of the service's customer "
                                                                  "has this id"})
    return key.id
