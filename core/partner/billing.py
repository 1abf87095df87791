"""Billing: periods, and the per-license history the billing models price, rebuilt from
the activity ledger (never from current state alone, so a past period prices the same
way again).

Money is integer cents everywhere; ``Decimal`` only for ``quantity``.
"""
from __future__ import annotations

import calendar
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, NamedTuple

BILLABLE_STATES = ("active", "suspended")
TERMINAL_STATES = ("terminated", "expired")
_STATE_AFTER = {"license.issued": "active", "license.suspended": "suspended", "license.resumed": "active",
                "license.terminated": "terminated"}


@dataclass(frozen=True)
class Period:
    start: date
    end: date  # inclusive

    @classmethod
    def containing(cls, day: date) -> "Period":
        last = calendar.monthrange(day.year, day.month)[1]
        return cls(day.replace(day=1), day.replace(day=last))

    @classmethod
    def parse(cls, text: str) -> "Period":
        """``YYYY-MM``."""
        year, month = text.split("-")
        if len(year) != 4 or len(month) != 2:
            raise ValueError(f"not a period (YYYY-MM): {text!r}")
        return cls.containing(date(int(year), int(month), 1))

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @property
    def label(self) -> str:
        return self.start.strftime("%Y-%m")


#: whose a billable day is: (partner, contract), as the ledger events name them
Owner = tuple[str | None, str | None]


class Change(NamedTuple):
    """One ledger event, reduced to what billing needs (a tuple: there are many)."""

    id: int
    on: date  # UTC day of the event
    event: str
    state_to: str | None = None  # license.state_changed
    effective: date | None = None  # transfers
    to_partner: str | None = None
    to_contract: str | None = None
    partner: str | None = None  # license.issued: the first owner
    contract: str | None = None


@dataclass
class LicenseHistory:
    license_id: str
    key_masked: str
    changes: list[Change] = field(default_factory=list)  # in ledger order


def change_from_event(event_id: int, at: datetime, event: str, partner_id: str, data: dict) -> Change:
    on = (at.astimezone(timezone.utc) if at.tzinfo else at).date()  # ledger times are UTC
    if event == "license.issued":
        return Change(event_id, on, event, partner=partner_id, contract=data.get("contractId"))
    if event == "license.state_changed":
        return Change(event_id, on, event, state_to=data.get("to"))
    if event == "license.transferred_in":
        return Change(event_id, on, event, effective=date.fromisoformat(data["effectiveDate"]),
                      to_partner=data["toPartnerId"], to_contract=data["toContractId"])
    return Change(event_id, on, event)


def billable_days(history: LicenseHistory, period: Period, today: date) -> dict[Owner, int]:
    """Days of ``period`` (up to and including ``today``) on which the license is billable,
    per owner ``(partner, contract)``.

    Billable on day d: it belongs to the owner on d (the latest transfer whose effective
    date is <= d decides), d is not before its issue day, and its state at the end of d
    is active or suspended, or it was terminated or expired during d. Trial days are not.
    """
    changes = history.changes
    issued = changes[0] if changes and changes[0].event == "license.issued" else \
        next((c for c in changes if c.event == "license.issued"), None)
    if issued is None:
        return {}
    last = min(period.end, today)
    first = max(period.start, issued.on)
    if first > last:
        return {}
    if len(changes) == 1:  # the common case: issued, nothing since
        return {(issued.partner, issued.contract): (last - first).days + 1}
    for c in changes:
        if c.event == "license.transferred_in":
            return _owned_days(history, issued, first, last)
    days = _one_owner_days(changes, first, last)  # never transferred: one owner throughout
    return {(issued.partner, issued.contract): days} if days else {}


def _one_owner_days(changes, first: date, last: date) -> int:
    """Billable days in [first, last] of a license that never changed hands (what
    ``_owned_days`` counts for its one owner, without cutting the period by owners): the
    state after each change day holds until the next change day; a day whose end state
    is billable counts, and so does a change day on which it turned terminal."""
    days, start, state, terminal = 0, None, None, False  # the open segment: from `start`, `state` at its end
    after = _STATE_AFTER
    for c in changes:
        new = c.state_to if c.event == "license.state_changed" else after.get(c.event)
        if new is None:
            continue
        if c.on != start:
            if start is not None:
                days += _segment_days(start, c.on, state, terminal, first, last)
            start, terminal = c.on, False
        state = new
        terminal = terminal or new in TERMINAL_STATES
    if start is not None:
        days += _segment_days(start, last + _ONE_DAY, state, terminal, first, last)
    return days


def _segment_days(start: date, end: date, state, terminal: bool, first: date, last: date) -> int:
    """Billable days of [start, end) within [first, last], where ``state`` holds at the end
    of every day from ``start`` and ``terminal`` says the license turned terminal on ``start``."""
    if state in BILLABLE_STATES:
        a, b = max(start, first), min(end, last + _ONE_DAY)
        return (b - a).days if a < b else 0
    return 1 if terminal and first <= start <= last else 0


_ONE_DAY = timedelta(days=1)


def _owned_days(history: LicenseHistory, issued: Change, first: date, last: date) -> dict[Owner, int]:
    """``billable_days`` for a license that may have changed hands: the period cut at every
    state change and every transfer."""
    # state at the end of each change day, and the days something turned terminal
    states: list[tuple[date, str]] = []
    terminal_days: set[date] = set()
    for c in history.changes:
        new = c.state_to if c.event == "license.state_changed" else _STATE_AFTER.get(c.event)
        if new is None:
            continue
        if states and states[-1][0] == c.on:
            states[-1] = (c.on, new)
        else:
            states.append((c.on, new))
        if new in TERMINAL_STATES:
            terminal_days.add(c.on)
    owners: list[tuple[Any, int, Owner]] = [(issued.on, 0, (issued.partner, issued.contract))]
    owners += sorted((c.effective, c.id, (c.to_partner, c.to_contract)) for c in history.changes
                     if c.event == "license.transferred_in")
    cuts = {first, last + timedelta(days=1)}
    cuts.update(d for d, _ in states if first < d <= last)
    cuts.update(d for d, _, _ in owners if first < d <= last)
    bounds = sorted(cuts)
    result: dict[Owner, int] = {}
    si = oi = 0
    state = owner = None
    for a, b in zip(bounds, bounds[1:]):
        while si < len(states) and states[si][0] <= a:
            state = states[si][1]
            si += 1
        while oi < len(owners) and owners[oi][0] <= a:
            owner = owners[oi][2]
            oi += 1
        if owner is None or state is None:
            continue
        days = 0
        if state in BILLABLE_STATES or a in terminal_days:
            days += 1
        if state in BILLABLE_STATES:
            days += (b - a).days - 1
        if days:
            result[owner] = result.get(owner, 0) + days
    return result


def round_half_up(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded half up, in integers (no floats in money)."""
    if denominator <= 0:
        raise ValueError("denominator must be positive")
    quotient, remainder = divmod(numerator, denominator)
    return quotient + (1 if 2 * remainder >= denominator else 0)


def quantity(days: int, period_days: int) -> Decimal:
    return (Decimal(days) / Decimal(period_days)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
