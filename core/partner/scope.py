"""Subtree scoping and pagination: the rules every partner-API lookup follows."""
from __future__ import annotations

from dataclasses import dataclass

from core.errors import NotFound

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class Page:
    limit: int = DEFAULT_LIMIT
    offset: int = 0


def subtree(uow, caller) -> set[str]:
    """The caller's partner id and every descendant's."""
    return uow.partners.subtree_ids(caller.partner.id)


def visible(thing, scope: set[str], what: str, thing_id: str):
    """``thing`` when it exists and its partner is in ``scope``; otherwise 404, the same
    answer for missing and foreign ids."""
    if thing is None or getattr(thing, "partner_id", None) not in scope:
        raise NotFound(f"{what} {thing_id} not found")
    return thing
