"""The partner API's repositories in the storage port (``ports.storage``): partners,
tokens, contracts, humanId counters, customers, contacts, notes, editions, licenses,
transfers, the ledger, webhook endpoints and deliveries, statements. The conventions they
keep are in the package's docstring."""
from __future__ import annotations

import builtins
from abc import abstractmethod
from typing import Protocol

from core.partner.contracts import Contract
from core.partner.customers import Contact, Customer, Note
from core.partner.identity import Partner, Token
from core.partner.ledger import ActivityFilter, LedgerEvent
from core.partner.licenses import License, LicenseSummary
from core.partner.scope import Page
from core.partner.transfers import Transfer
from core.partner.webhooks import Delivery, Endpoint


class PartnerRepository(Protocol):
    @abstractmethod
    def add(self, partner: Partner) -> None:
        """Insert a partner (its parent, when named, exists)."""

    @abstractmethod
    def get(self, partner_id: str) -> Partner | None:
        """The partner, or None."""

    @abstractmethod
    def all_ids(self) -> list[str]:
        """Every partner's id, ascending."""

    @abstractmethod
    def subtree_ids(self, partner_id: str) -> set[str]:
        """The partner's id and the ids of all its descendants."""


class TokenRepository(Protocol):
    @abstractmethod
    def add(self, token: Token) -> None:
        """Insert a token; its ``token_hash`` is unique."""

    @abstractmethod
    def get(self, token_id: str) -> Token | None:
        """The token, or None."""

    @abstractmethod
    def by_hash_with_partner(self, token_hash: str) -> tuple[Token, Partner] | None:
        """The token with this SHA-256 hash and its partner, in one lookup."""

    @abstractmethod
    def list_for_partner(self, partner_id: str) -> list[Token]:
        """All of a partner's tokens, newest first."""

    @abstractmethod
    def revoke(self, token_id: str, at) -> None:
        """Set ``revoked_at`` to ``at`` unless the token is revoked already."""

    @abstractmethod
    def touch(self, token_id: str, at, older_than) -> None:
        """Set ``last_used_at`` to ``at`` unless it is already later than ``older_than``."""


class ContractRepository(Protocol):
    @abstractmethod
    def add(self, contract: Contract) -> None:
        """Insert a billing contract."""

    @abstractmethod
    def get(self, contract_id: str) -> Contract | None:
        """The contract, or None."""

    @abstractmethod
    def for_partner(self, partner_id: str) -> list[Contract]:
        """The partner's contracts, by id."""

    @abstractmethod
    def page(self, partner_id: str, page) -> list[Contract]:
        """A page (``core.partner.scope.Page``) of the partner's own contracts, newest first
        (ties by id)."""


class HumanIdRepository(Protocol):
    @abstractmethod
    def next(self, kind: str) -> str:
        """The next human-readable id of ``kind`` (``C``, ``P``, ``L``, ``T``): ``C-1001``,
        ``C-1002``, ...; the counter's row stays locked until the transaction ends, and a
        rolled-back transaction gives its number back."""


class CustomerRepository(Protocol):
    @abstractmethod
    def add(self, customer: Customer) -> None:
        """Insert a customer; ``id`` and ``human_id`` are unique."""

    @abstractmethod
    def get(self, customer_id: str, for_update: bool = False) -> Customer | None:
        """The customer unless deleted, or None."""

    @abstractmethod
    def list(self, scope, page: Page, *, status=None, external_ref=None) -> list[Customer]:
        """Customers (not deleted) of the partners in ``scope``, optionally of one status
        or external reference, newest first (``created_at``, then id, descending)."""

    @abstractmethod
    def update(self, customer: Customer) -> None:
        """Store every editable field; ``id``, ``human_id``, partner and ``created_at`` stay."""

    @abstractmethod
    def delete(self, customer_id: str, at) -> None:
        """Soft delete: the customer is gone for ``get`` and ``list`` from ``at`` on."""


class ContactRepository(Protocol):
    @abstractmethod
    def add(self, contact: Contact) -> None:
        """Insert a contact; at most one primary contact per customer (unique)."""

    @abstractmethod
    def get(self, contact_id: str) -> Contact | None:
        """The contact, or None."""

    @abstractmethod
    def list_for_customer(self, customer_id: str) -> list[Contact]:
        """The customer's contacts: the primary first, then oldest first."""

    @abstractmethod
    def update(self, contact: Contact) -> None:
        """Store every editable field and ``updated_at``."""

    @abstractmethod
    def demote_primary(self, customer_id: str, at) -> None:
        """The customer's primary contact (if any) is primary no longer, updated ``at``."""

    @abstractmethod
    def delete(self, contact_id: str) -> None:
        """Remove the contact."""


class NoteRepository(Protocol):
    """Append and read; there is deliberately no update or delete."""

    @abstractmethod
    def append(self, note: Note) -> Note:
        """Store the note; returns it with its new id (ids ascend)."""

    @abstractmethod
    def recent(self, customer_id: str, count: int) -> list[Note]:
        """The customer's latest ``count`` notes, newest first."""


class EditionRepository(Protocol):
    @abstractmethod
    def policy_for(self, edition: str) -> str | None:
        """The license-service policy of ``edition``, or None when it is not known."""

    @abstractmethod
    def all(self) -> dict[str, str]:
        """``{edition: policy}``, by edition name."""

    @abstractmethod
    def set(self, edition: str, policy: str, at) -> None:
        """Insert or change the edition's policy."""


class LicenseRepository(Protocol):
    @abstractmethod
    def add(self, lic: License) -> None:
        """Insert a license; ``id`` and ``human_id`` are unique."""

    @abstractmethod
    def get(self, license_id: str, for_update: bool = False) -> License | None:
        """The license, or None."""

    @abstractmethod
    def list(self, scope, page: Page, *, customer_id=None, state=None, edition=None) -> list[LicenseSummary]:
        """Licenses of the partners in ``scope`` as a list page reads them
        (``LicenseSummary``), optionally filtered, newest first (``issued_at``, then id,
        descending)."""

    @abstractmethod
    def update(self, lic: License) -> None:
        """Store the license; ``id``, ``human_id`` and ``issued_at`` stay."""

    @abstractmethod
    def count_live_for_customer(self, customer_id: str) -> int:
        """How many of the customer's licenses are active, trial or suspended."""


class TransferRepository(Protocol):
    @abstractmethod
    def add(self, transfer: Transfer) -> None:
        """Insert a transfer record."""

    @abstractmethod
    def list(self, scope, page: Page, *, license_id=None) -> list[Transfer]:
        """Transfers from or to a partner in ``scope``, optionally of one license, newest
        first (``created_at``, then id, descending)."""

    @abstractmethod
    def set_sync_error(self, transfer_id: str, message: str) -> None:
        """Record why the license service could not be told about the transfer."""

    @abstractmethod
    def sync_failures(self) -> builtins.list[Transfer]:  # (``list`` is a method of this class)
        """Transfers with a ``sync_error``, oldest first (for the operator)."""


class LedgerRepository(Protocol):
    """Append and read; no update or delete path."""

    @abstractmethod
    def append(self, event: LedgerEvent) -> LedgerEvent:
        """Store the event; returns it with its new id (ids ascend)."""

    @abstractmethod
    def get(self, event_id: int) -> LedgerEvent | None:
        """The event, or None."""

    @abstractmethod
    def for_customer(self, customer_id: str, filters: ActivityFilter, page: Page) -> list[LedgerEvent]:
        """The customer's events matching ``filters``, newest first (by id): those naming
        the customer, and older ones without a customer reached through its licenses."""

    @abstractmethod
    def for_customer_before(self, customer_id: str, filters: ActivityFilter, before_id,
                            size: int) -> list[LedgerEvent]:
        """As ``for_customer``, the first ``size`` with an id below ``before_id`` (all
        when None)."""

    @abstractmethod
    def export_rows(self, customer_id: str, filters: ActivityFilter, before_id, size: int) -> list:
        """As ``for_customer_before``, as ``core.partner.ledger.ExportRow`` tuples (``data``
        the stored canonical JSON text): what the CSV export writes, with nothing decoded."""

    @abstractmethod
    def histories_for_partner(self, partner_id: str) -> list:
        """Every license the partner ever owned (issued to it or transferred in), with its
        billing-relevant events: ``[(core.partner.billing.LicenseHistory, {contract ids it was
        under}), ...]``, by license id, the changes in ledger order."""

    @abstractmethod
    def summary_for_customer(self, customer_id: str, filters: ActivityFilter) -> tuple:
        """``({event: count}, first at, last at)`` of the events ``for_customer`` reads."""


class WebhookEndpointRepository(Protocol):
    @abstractmethod
    def add(self, endpoint: Endpoint) -> None:
        """Insert an endpoint."""

    @abstractmethod
    def get(self, endpoint_id: str) -> Endpoint | None:
        """The endpoint, or None."""

    @abstractmethod
    def list_for_partner(self, partner_id: str) -> list[Endpoint]:
        """A partner's endpoints, newest first (tie-break on id)."""

    @abstractmethod
    def count_for_partner(self, partner_id: str) -> int:
        """How many endpoints the partner has."""

    @abstractmethod
    def for_partners(self, partner_ids: list[str]) -> list[Endpoint]:
        """The endpoints of any of these partners, oldest first (tie-break on id)."""

    @abstractmethod
    def delete(self, endpoint_id: str) -> None:
        """Remove the endpoint (its deliveries first: they refer to it)."""


class WebhookDeliveryRepository(Protocol):
    @abstractmethod
    def add(self, delivery: Delivery) -> None:
        """Insert a delivery."""

    @abstractmethod
    def for_endpoint(self, endpoint_id: str, page: Page) -> list[Delivery]:
        """The endpoint's deliveries, newest event first (tie-break on id)."""

    @abstractmethod
    def delete_for_endpoint(self, endpoint_id: str) -> int:
        """Remove every delivery of the endpoint; how many went."""

    @abstractmethod
    def due(self, now, exclude, limit: int) -> list[Delivery]:
        """Up to ``limit`` pending deliveries due at ``now`` (``next_attempt_at <= now``),
        unclaimed or with a lapsed claim (``claimed_until < now``), of endpoints not in
        ``exclude``; oldest due first, then by event."""

    @abstractmethod
    def claim(self, delivery_id: str, owner: str, now, until) -> Delivery | None:
        """Claim the delivery for ``owner`` until ``until`` if it is still pending, due at
        ``now``, and unclaimed or its claim lapsed before ``now``: one conditional update,
        of racing callers exactly one wins. The delivery as stored now, or None when this
        call did not claim it."""

    @abstractmethod
    def finish(self, delivery: Delivery, owner: str) -> bool:
        """Store ``delivery``'s status, attempts, last answer, delivery time, next attempt
        and claim if ``owner`` still holds its claim; whether it did."""


class StatementRepository(Protocol):
    @abstractmethod
    def add(self, s) -> None:
        """Insert a ``core.partner.statements.Statement``."""

    @abstractmethod
    def try_lock_recompute(self) -> bool:
        """Take the transaction-scoped recompute lock; False when another process holds it."""

    @abstractmethod
    def draft(self, partner_id: str, period):
        """The partner's draft of ``period``, or None."""

    @abstractmethod
    def replace_draft(self, s) -> None:
        """Drop the partner's draft of the period (if any) and insert ``s``."""

    @abstractmethod
    def latest_finalized(self, partner_id: str, period):
        """The partner's highest revision of ``period`` (finalized or superseded), or None."""

    @abstractmethod
    def finalize_draft(self, s) -> None:
        """Store ``s``'s status, revision and finalization on the draft of the same id."""

    @abstractmethod
    def supersede(self, statement_id: str) -> None:
        """The statement's status becomes ``superseded``."""

    @abstractmethod
    def get(self, statement_id: str):
        """The statement, or None."""

    @abstractmethod
    def visible_for(self, partner_id: str) -> list:
        """The partner's statements but drafts, newest period first, then highest revision."""
