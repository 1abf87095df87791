"""The edition map: operator data that resolves a commercial edition to a license-service
policy. The API takes editions; it never shows a policy."""
from __future__ import annotations

import re

from core.errors import Invalid

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def list_editions(uow) -> dict[str, str]:
    with uow:
        return uow.editions.all()


def set_edition(uow, clock, name: str, policy: str) -> dict[str, str]:
    if not _NAME.match(name or ""):
        raise Invalid("edition names are 1-64 lower-case letters, digits, '.', '_' or '-'",
                      fields={"name": "invalid edition name"})
    if not (policy or "").strip():
        raise Invalid("policy must not be empty", fields={"policy": "must not be empty"})
    with uow:
        uow.editions.set(name, policy.strip(), clock.now())
        uow.commit()
        return uow.editions.all()
