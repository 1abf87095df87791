"""Use cases of the partner tree: create partners, resolve a caller's subtree."""
from __future__ import annotations

import uuid

from core.errors import Invalid, NotFound
from core.partner.identity import PARTNER_TYPES, Partner


def create_partner(uow, clock, *, name: str, type: str = "reseller", parent_id: str | None = None) -> Partner:
    """Create a partner; a sub-reseller names its parent, a root partner has none."""
    name = (name or "").strip()
    if not name:
        raise Invalid("name must not be empty", fields={"name": "must not be empty"})
    if type not in PARTNER_TYPES:
        raise Invalid(f"type must be one of {', '.join(PARTNER_TYPES)}", fields={"type": "unknown partner type"})
    if type == "root" and parent_id:
        raise Invalid("a root partner has no parent", fields={"parent": "a root partner has no parent"})
    with uow:
        if parent_id is not None:
            if not is_uuid(parent_id):
                raise Invalid("parent must be a partner id (UUID)", fields={"parent": "not a UUID"})
            if uow.partners.get(parent_id) is None:
                raise NotFound(f"partner {parent_id} not found")
        partner = Partner(id=str(uuid.uuid4()), name=name, type=type, parent_id=parent_id, created_at=clock.now())
        uow.partners.add(partner)
        uow.commit()
    return partner


def get_partner(uow, partner_id: str) -> Partner:
    with uow:
        partner = uow.partners.get(partner_id) if is_uuid(partner_id) else None
    if partner is None:
        raise NotFound(f"partner {partner_id} not found")
    return partner


def list_partners(uow) -> list[Partner]:
    """Every partner, oldest first (ties by id): what an operator picks ids from."""
    with uow:
        found = [uow.partners.get(partner_id) for partner_id in uow.partners.all_ids()]
    return sorted((p for p in found if p is not None), key=lambda p: (p.created_at, p.id))


def is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return False
    return True
