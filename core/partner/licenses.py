"""Licenses: issue, suspend, resume, terminate, change edition; each change goes through
the license-service port and the ledger in one transaction."""
from __future__ import annotations

import uuid
from collections import namedtuple
from dataclasses import MISSING, dataclass, fields, replace
from datetime import datetime

from core import waits
from core.partner import ledger
from core.errors import Conflict, Invalid, NotFound
from core.partner.scope import Page, subtree, visible

STATES = ("active", "trial", "suspended", "terminated", "expired")
OPERATOR_STATES = ("trial", "expired", "active")
FINAL = "terminated"


@dataclass(frozen=True)
class License:
    id: str
    human_id: str
    partner_id: str
    customer_id: str
    contract_id: str
    license_service_license_id: str
    key_masked: str
    edition: str
    state: str
    issued_at: datetime
    external_billing_ref: str = ""
    metadata: str = ""
    terminated_at: datetime | None = None


class LicenseSummary(namedtuple("LicenseSummary", [f.name for f in fields(License)],  # type: ignore[misc]
                                defaults=[f.default for f in fields(License)  # type: ignore[misc]
                                          if f.default is not MISSING])):  # (the fields are License's)
    """A license as a list page shows it (``GET /v1/licenses``): the fields of ``License``,
    in its order and with its defaults, read into an immutable tuple. A read model: the
    page decides nothing with it, and fifty of them cost a fraction of fifty frozen
    dataclasses (``python -m bench lists``)."""

    __slots__ = ()

    @classmethod
    def of(cls, lic: License) -> "LicenseSummary":
        return cls._make(getattr(lic, name) for name in cls._fields)  # type: ignore[var-annotated]


#: the license service is called inside the license's transaction (its answer and the
#: row are kept together, a failure rolls both back): a known exception to core.waits' rule,
#: listed in docs/security.md "Known gaps" (the panel keeps the rule; the partner API's
#: license service is the operator's own, not a customer's)
LICENSE_SERVICE = "the partner API's license service, inside the license's transaction"


def mask(key: str) -> str:
    return "\u2026" + key[-6:]


def service_metadata(lic: License) -> dict:
    return {"slipwayLicenseId": lic.id, "humanId": lic.human_id, "partnerId": lic.partner_id,
            "customerId": lic.customer_id, "contractId": lic.contract_id, "edition": lic.edition}


def _policy(uow, edition: str) -> str:
    policy = uow.editions.policy_for(edition)
    if policy is None:
        known = sorted(uow.editions.all())
        listed = ", ".join(known) if known else "none: the operator maps them with `slipway edition set`"
        raise Invalid(f"unknown edition {edition!r} (known editions: {listed})",
                      fields={"edition": f"{edition!r} is not a known edition; known editions: {listed}"})
    return policy


def issue_license(uow, clock, service, caller, *, customer_id: str, contract_id: str, edition: str,
                  external_billing_ref: str = "", metadata: str = ""):
    """Returns (license, full key); the key is never stored or shown again."""
    issued = None
    try:
        with uow:
            policy = _policy(uow, edition)
            scope = subtree(uow, caller)
            customer = visible(uow.customers.get(customer_id), scope, "customer", customer_id)
            contract = visible(uow.contracts.get(contract_id), scope, "contract", contract_id)
            if customer.partner_id != contract.partner_id:
                raise Invalid("customer and contract belong to different partners",
                              fields={"contractId": "must belong to the customer's partner"})
            lic = License(id=str(uuid.uuid4()), human_id=uow.human_ids.next("L"), partner_id=customer.partner_id,
                          customer_id=customer.id, contract_id=contract.id, license_service_license_id="",
                          key_masked="", edition=edition, state="active", issued_at=clock.now(),
                          external_billing_ref=external_billing_ref, metadata=metadata)
            with waits.allowed(LICENSE_SERVICE):
                issued = service.issue(policy=policy, metadata=service_metadata(lic))
            lic = replace(lic, license_service_license_id=issued.service_license_id, key_masked=mask(issued.key))
            uow.licenses.add(lic)
            ledger.record(uow, clock, event="license.issued", license=lic, actor=caller.partner.id,
                          data={"edition": edition, "contractId": contract.id, "keyMasked": lic.key_masked})
            uow.commit()
    except Exception:
        if issued is not None:  # the service has a license our database does not: take it back
            try:
                with waits.allowed(LICENSE_SERVICE):
                    service.revoke(issued.service_license_id)
            except Exception:  # noqa: BLE001 - best effort; the original error is what the caller needs
                pass
        raise
    return lic, issued.key


def get_license(uow, caller, license_id: str) -> License:
    with uow:
        return visible(uow.licenses.get(license_id), subtree(uow, caller), "license", license_id)


def list_licenses(uow, caller, page: Page, *, customer_id=None, state=None,
                  edition=None) -> list[LicenseSummary]:
    with uow:
        return uow.licenses.list(subtree(uow, caller), page, customer_id=customer_id, state=state,
                                 edition=edition)


def _change(uow, clock, caller, license_id: str, decide):
    """Load the license (locked), let ``decide`` return the new license, the ledger event
    and the service call, or None for a no-op; store all of it in one transaction."""
    with uow:
        lic = visible(uow.licenses.get(license_id, for_update=True), subtree(uow, caller), "license", license_id)
        decision = decide(lic)
        if decision is None:
            return lic
        changed, event, data, call = decision
        with waits.allowed(LICENSE_SERVICE):
            call()
        uow.licenses.update(changed)
        ledger.record(uow, clock, event=event, license=changed, actor=caller.partner.id, data=data)
        uow.commit()
        return changed


def suspend_license(uow, clock, service, caller, license_id: str) -> License:
    def decide(lic):
        if lic.state == "suspended":
            return None
        if lic.state in ("terminated", "expired"):
            raise Conflict(f"a {lic.state} license cannot be suspended")
        return (replace(lic, state="suspended"), "license.suspended", {"from": lic.state},
                lambda: service.suspend(lic.license_service_license_id))

    return _change(uow, clock, caller, license_id, decide)


def resume_license(uow, clock, service, caller, license_id: str) -> License:
    def decide(lic):
        if lic.state == "active":
            return None
        if lic.state != "suspended":
            raise Conflict(f"a {lic.state} license cannot be resumed")
        return (replace(lic, state="active"), "license.resumed", {},
                lambda: service.reinstate(lic.license_service_license_id))

    return _change(uow, clock, caller, license_id, decide)


def terminate_license(uow, clock, service, caller, license_id: str) -> License:
    def decide(lic):
        if lic.state == FINAL:
            return None
        return (replace(lic, state=FINAL, terminated_at=clock.now()), "license.terminated", {"from": lic.state},
                lambda: service.revoke(lic.license_service_license_id))

    return _change(uow, clock, caller, license_id, decide)


def change_edition(uow, clock, service, caller, license_id: str, edition: str) -> License:
    with uow:
        policy = _policy(uow, edition)

    def decide(lic):
        if lic.state != "active":
            raise Conflict(f"the edition of a {lic.state} license cannot be changed")
        if lic.edition == edition:
            return None
        return (replace(lic, edition=edition), "license.edition_changed", {"from": lic.edition, "to": edition},
                lambda: service.change_policy(lic.license_service_license_id, policy))

    return _change(uow, clock, caller, license_id, decide)


def set_state(uow, clock, license_id: str, state: str) -> License:
    """What the license service reports (trial start, expiry, reinstatement); operator only."""
    if state not in OPERATOR_STATES:
        raise Invalid("invalid state", fields={"state": "must be one of " + ", ".join(OPERATOR_STATES)})
    with uow:
        lic = uow.licenses.get(license_id, for_update=True)
        if lic is None:
            raise NotFound(f"license {license_id} not found")
        if lic.state == FINAL:
            raise Conflict("a terminated license is final")
        if lic.state == state:
            return lic
        changed = replace(lic, state=state)
        uow.licenses.update(changed)
        ledger.record(uow, clock, event="license.state_changed", license=changed, actor=None,
                      data={"from": lic.state, "to": state})
        uow.commit()
        return changed
