"""Secret variables at rest: AES-GCM with the operator's key (``SLIPWAY_SECRET_KEY``).

A service's (and a release's) secret variables are kept in its ``secret_values`` column
as ``v1:`` + base64 of a random 12-byte nonce and the AES-256-GCM ciphertext of their
JSON map; the row's id is the associated data, so a value copied into another row does
not decrypt. ``variables`` keeps ``***`` in their place (``core.panel.secrets.MASK``).

The key is 32 random bytes, written in base64 (``slipway init`` writes one into the file
:data:`KEY_FILE` of the work folder when ``SLIPWAY_SECRET_KEY`` is unset; the server
reads it from there): :func:`load_key`."""
from __future__ import annotations

import base64
import binascii
import json
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_FILE = "secret.key"  # in SLIPWAY_WORK_DIR
VERSION = "v1:"


class BadKey(ValueError):
    """The key is missing or not 32 bytes of base64; the message says where it came from."""


class MissingKey(BadKey):
    """Neither the setting nor the key file is there."""


class UnreadableSecrets(RuntimeError):
    """Stored secrets do not decrypt with this key (another key, or altered bytes)."""


def new_key() -> str:
    """A fresh key, as the setting and the key file hold it."""
    return base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def parse_key(text: str, where: str) -> bytes:
    """The 32 bytes of a base64 key (standard or URL-safe alphabet), else :class:`BadKey`."""
    raw = (text or "").strip()
    try:
        key = base64.b64decode(raw.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise BadKey(f"{where} must be 32 random bytes in base64 (44 characters, e.g. from "
                        "`slipway init` or `openssl rand -base64 32`)")
    return key


def key_path(work_dir: str) -> str:
    return os.path.join(work_dir, KEY_FILE)


def load_key(environ, work_dir: str) -> bytes:
    """``SLIPWAY_SECRET_KEY`` when set, else the key file in ``work_dir``;
    :class:`BadKey` when neither holds a valid key."""
    given = environ.get("SLIPWAY_SECRET_KEY")
    if given is not None and given.strip():
        return parse_key(given, "SLIPWAY_SECRET_KEY")
    path = key_path(work_dir)
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except FileNotFoundError:
        raise MissingKey(f"no secret key: set SLIPWAY_SECRET_KEY or run `slipway init`, which writes one to {path}") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadKey(f"the secret key file {path} cannot be read: {exc}") from None
    return parse_key(text, f"the secret key file {path}")


def ensure_key_file(environ, work_dir: str) -> str | None:
    """What ``slipway init`` does for the key: with ``SLIPWAY_SECRET_KEY`` unset and no key
    file in ``work_dir``, write a new key there (mode 0600, the folder 0700 when made);
    returns the path written, None when nothing was to do."""
    if (environ.get("SLIPWAY_SECRET_KEY") or "").strip():
        return None
    path = key_path(work_dir)
    if os.path.exists(path):
        return None
    os.makedirs(work_dir, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(new_key() + "\n")
    return path


class SecretBox:
    """Encrypts and decrypts the secret variables of a row; the key can be set once the
    configuration is read (``use``): a store is made before the app is composed."""

    def __init__(self, key: bytes | None = None):
        self._aead = AESGCM(key or secrets.token_bytes(32))

    def use(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(self, values: dict, row_id: str) -> str | None:
        """``values`` (name -> clear value) encrypted for row ``row_id``; None when empty."""
        if not values:
            return None
        nonce = secrets.token_bytes(12)
        data = json.dumps(values, sort_keys=True).encode("utf-8")
        return VERSION + base64.b64encode(nonce + self._aead.encrypt(nonce, data, row_id.encode("utf-8"))).decode()

    def open(self, sealed: str | None, row_id: str) -> dict:
        """The clear map of a ``secret_values`` column (``{}`` for none)."""
        if not sealed:
            return {}
        if not sealed.startswith(VERSION):
            raise UnreadableSecrets(f"the secret variables of {row_id} are in an unknown format")
        try:
            blob = base64.b64decode(sealed[len(VERSION):])
            clear = self._aead.decrypt(blob[:12], blob[12:], row_id.encode("utf-8"))
        except (InvalidTag, ValueError, binascii.Error):
            raise UnreadableSecrets(f"the secret variables of {row_id} do not decrypt with SLIPWAY_SECRET_KEY "
                                    "(another key, or changed data)") from None
        return json.loads(clear)


def split(variables: dict | None, names, mask: str) -> tuple[dict, dict]:
    """``(shown, hidden)``: the variables with each secret one masked, and the secret ones."""
    names = set(names or ())
    variables = variables or {}
    shown = {k: mask if k in names else v for k, v in variables.items()}
    hidden = {k: v for k, v in variables.items() if k in names}
    return shown, hidden
