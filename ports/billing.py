"""The billing-model port: how one contract's usage over one period is priced.

A model gets the contract, the period, "today" (usage counts days up to and including
it) and the history of every license that was ever under the contract, rebuilt from
the activity ledger; it returns one statement line. Money is integer cents. ``register_billing_models``
returns :class:`BillingModelFactory` objects; the app creates each model once.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from core.partner.billing import LicenseHistory, Period
from core.partner.contracts import Contract


@dataclass(frozen=True)
class LineDetail:
    license_id: str
    key_masked: str
    days: int
    amount_cents: int


@dataclass(frozen=True)
class Line:
    contract_id: str
    model: str
    currency: str
    quantity: Decimal
    unit_price_cents: int
    amount_cents: int
    detail: tuple[LineDetail, ...] = field(default_factory=tuple)


class BillingModel(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The model's name as contracts and statement lines carry it."""

    @property
    def description(self) -> str:
        return ""

    @abstractmethod
    def price(self, contract: Contract, period: Period, histories: list[LicenseHistory], today: date) -> Line:
        """Price ``contract`` over ``period``. Deterministic: the same histories and day
        give the same line, so a past period prices the same way again."""


class BillingModelFactory(ABC):
    """What ``register_billing_models`` returns: ``name`` (the model's) and
    ``create(settings)``, called once when the app is built."""

    name: str

    @abstractmethod
    def create(self, settings) -> BillingModel:
        """The model, built with all it needs (``settings``: ``ports.settings.Settings``);
        a bad setting is a ``ValueError`` naming the variable (start-up stops)."""
