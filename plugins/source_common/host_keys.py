"""The ssh host keys a clone trusts: the known-hosts file of the job and the ssh options
that check it (the rule: :mod:`core.panel.host_keys`).

Each ssh clone gets a known-hosts file of its job's own (``known_hosts`` in the work
folder) and looks the server's key up by one name, its ``HostKeyAlias`` (the host of
the URL, without the port). What the file holds decides how strict ssh is:

- a host whose keys ship with Slipway (:data:`SHIPPED`: github.com, gitlab.com,
  bitbucket.org): its published keys, ``StrictHostKeyChecking=yes`` from the first clone;
- a service with a pinned key: that key alone, ``StrictHostKeyChecking=yes``;
- otherwise nothing, ``StrictHostKeyChecking=accept-new``: ssh writes the key it was
  shown into the file, and :func:`seen` reads it back for the deploy job to pin.
"""
from __future__ import annotations

import functools
import os

from core.panel.host_keys import key_of

FILE = "known_hosts"  # in the job's work folder
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_hosts")
#: ssh's words when a strict check fails (a key other than the known one, or of a type none is known of)
REFUSED = "Host key verification failed"


@functools.cache
def published() -> dict[str, tuple[str, ...]]:
    """``{host: (key, ...)}`` of the shipped file, each host's keys in the file's order
    (``<type> <base64>``)."""
    found: dict[str, list] = {}
    with open(SHIPPED, encoding="ascii") as handle:
        for line in handle:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key = key_of(line)
            if key is not None:
                found.setdefault(line.split()[0].lower(), []).append(key)
    return {host: tuple(keys) for host, keys in found.items()}


def alias(ssh_options: tuple, host: str) -> str:
    """The name ssh looks the host key up by: the ``HostKeyAlias`` of ``ssh_options``
    (the connection's, :func:`plugins.source_common.source._connection`), else ``host``."""
    for option in ssh_options:
        if option.startswith("HostKeyAlias="):
            return option.split("=", 1)[1]
    return host


def write(path: str, host: str, pinned: str | None, opener) -> tuple[bool, str | None]:
    """Write the known-hosts file at ``path`` (with ``opener``, a private file) for a
    clone of ``host`` whose service pinned ``pinned`` (``<type> <base64>`` or None):
    (strict, the key the server must show): the shipped keys of a host that has them,
    else the pinned key alone, else an empty file (``(False, None)``: accept the first
    key shown)."""
    keys = published().get(host.lower()) or ((key_of(pinned),) if key_of(pinned) else ())
    with opener(path) as handle:
        handle.writelines(f"{host} {key}\n" for key in keys)
    return (True, keys[0]) if keys else (False, None)


def refused(message: str) -> bool:
    """True when ssh's own output in a failed clone's ``message`` says its strict check
    refused the server's key (a line of the server's, ``remote: ...``, never counts)."""
    return any(line.strip().startswith(REFUSED) for line in message.splitlines())


def seen(path: str) -> str | None:
    """The key of the job's known-hosts file after a clone (``<type> <base64>``): the one
    ssh accepted and wrote there, or the first of those it was to be shown; None when no
    ssh clone wrote one."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                key = key_of(line)
                if key is not None:
                    return key
    except FileNotFoundError:
        return None
    return None
