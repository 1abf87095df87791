"""Folders the server keeps tenants' data in (backup archives, deploy jobs' work folders):
the server user's only (docs/decisions.md "Tenant safety, second round")."""
from __future__ import annotations

import os


def private_dir(path: str) -> None:
    """``path`` (and missing parents) made 0700, and set to 0700 if it was there and is the
    server user's. A folder of another owner (an operator's ``root:slipway 0770``) is left
    as it is: what Slipway makes inside it is 0700 itself, and its owner decides its mode."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.stat(path).st_uid == os.geteuid():
        os.chmod(path, 0o700)
