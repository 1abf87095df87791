"""The names of the activity ledger's events: what the ledger records
(``core.partner.ledger``) and what a webhook endpoint may subscribe to
(``core.partner.webhooks``), kept apart so that neither imports the other for them."""
from __future__ import annotations

EVENTS = (
    "license.issued", "license.suspended", "license.resumed", "license.terminated",
    "license.edition_changed", "license.transferred_out", "license.transferred_in", "license.state_changed",
)
