"""Fakes for unit tests of ``core`` and for driving time in API tests."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ports.clock import Clock


class FakeClock(Clock):
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None):
        self._now = start or datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)
        self._mono = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds


class InMemoryPartners:
    def __init__(self):
        self.rows = {}

    def add(self, partner):
        self.rows[partner.id] = partner

    def get(self, partner_id):
        return self.rows.get(partner_id)

    def subtree_ids(self, partner_id):
        found, frontier = {partner_id}, [partner_id]
        while frontier:
            parent = frontier.pop()
            for p in self.rows.values():
                if p.parent_id == parent and p.id not in found:
                    found.add(p.id)
                    frontier.append(p.id)
        return found


class InMemoryTokens:
    def __init__(self, partners):
        self.rows = {}
        self.partners = partners

    def add(self, token):
        self.rows[token.id] = token

    def get(self, token_id):
        return self.rows.get(token_id)

    def by_hash_with_partner(self, token_hash):
        for token in self.rows.values():
            if token.token_hash == token_hash:
                return token, self.partners.get(token.partner_id)
        return None

    def list_for_partner(self, partner_id):
        return sorted((t for t in self.rows.values() if t.partner_id == partner_id),
                      key=lambda t: t.created_at, reverse=True)

    def revoke(self, token_id, at):
        from dataclasses import replace

        self.rows[token_id] = replace(self.rows[token_id], revoked_at=at)

    def touch(self, token_id, at, older_than):
        from dataclasses import replace

        token = self.rows[token_id]
        if token.last_used_at is None or token.last_used_at <= older_than:
            self.rows[token_id] = replace(token, last_used_at=at)


class InMemoryContracts:
    def __init__(self):
        self.rows = {}

    def add(self, contract):
        self.rows[contract.id] = contract

    def get(self, contract_id):
        return self.rows.get(contract_id)


class FakeUnitOfWork:
    """Records commits; changes are visible immediately (no rollback: enough for rules)."""

    def __init__(self):
        self.partners = InMemoryPartners()
        self.tokens = InMemoryTokens(self.partners)
        self.contracts = InMemoryContracts()
        self.commits = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def commit(self):
        self.commits += 1
