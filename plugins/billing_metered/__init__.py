"""Billing model ``per_instance_metered``: one instance priced per UTC day it is billable.

The pricing itself lands with the billing issue; the model is declared now so that
contracts can be created for it.
"""
from ports import hookimpl
from ports.billing import BillingModel


class PerInstanceMetered(BillingModel):
    name = "per_instance_metered"
    description = "unitPriceCents per instance per period, prorated by billable UTC days"


@hookimpl
def register_billing_models():
    return [PerInstanceMetered()]
