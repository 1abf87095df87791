"""The billing-model port: how a contract's usage over a period is priced.

Issue "Billing" adds the pricing call; today a model declares its name so that contracts
can only name a model some loaded plugin provides.
"""
from __future__ import annotations

from abc import ABC, abstractmethod


class BillingModel(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The model's name as contracts and statement lines carry it."""

    @property
    def description(self) -> str:
        return ""
