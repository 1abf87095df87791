"""Billing model ``per_instance_metered``: one instance priced per UTC day it is billable.

Per license: ``amountCents = round_half_up(unitPriceCents * days / daysInPeriod)``; the
line's ``quantity`` is ``sum(days) / daysInPeriod`` to 4 decimals and its amount the sum
of the licenses' amounts. Which days are billable, and to whom, is
``core.partner.billing.billable_days``.
"""
from operator import attrgetter

from core.partner.billing import billable_days, quantity, round_half_up
from ports import hookimpl
from ports.billing import BillingModel, BillingModelFactory, Line, LineDetail


class PerInstanceMetered(BillingModel):
    name = "per_instance_metered"
    description = "unitPriceCents per instance per period, prorated by billable UTC days"

    def price(self, contract, period, histories, today):
        owner = (contract.partner_id, contract.id)
        unit, period_days = contract.unit_price_cents, period.days
        detail = []
        for history in sorted(histories, key=attrgetter("license_id")):
            days = billable_days(history, period, today).get(owner, 0)
            if days:
                detail.append(LineDetail(history.license_id, history.key_masked, days,
                                         round_half_up(unit * days, period_days)))
        return Line(contract_id=contract.id, model=self.name, currency=contract.currency,
                    quantity=quantity(sum(d.days for d in detail), period_days),
                    unit_price_cents=contract.unit_price_cents, amount_cents=sum(d.amount_cents for d in detail),
                    detail=tuple(detail))


class PerInstanceMeteredFactory(BillingModelFactory):
    name = PerInstanceMetered.name

    def create(self, settings) -> PerInstanceMetered:
        return PerInstanceMetered()  # it reads no setting


@hookimpl
def register_billing_models():
    return [PerInstanceMeteredFactory()]
