"""``billable_days`` takes a shorter path for a license that never changed hands: it must
count exactly what the owner-cutting walk (``_owned_days``) counts, for every history.
Thousands of random ledger-ordered histories (seeded, so a failure repeats), plus the
edges written out."""
from __future__ import annotations

import random
from datetime import date, timedelta

import pytest

from core.partner.billing import Change, LicenseHistory, Period, _owned_days, billable_days

NOVEMBER = Period.parse("2026-11")
EVENTS = ("license.suspended", "license.resumed", "license.terminated", "license.state_changed",
          "license.transferred_out", "license.renamed")
STATES = ("active", "suspended", "terminated", "expired", "trial")


def random_history(rng: random.Random) -> LicenseHistory:
    day = date(2026, 10, 20) + timedelta(days=rng.randrange(50))
    changes = [Change(1, day, "license.issued", partner="p", contract="c")]
    for i in range(2, 2 + rng.randrange(6)):
        day += timedelta(days=rng.choice((0, 0, 1, 3, 9)))  # ledger order: days never go back
        event = rng.choice(EVENTS)
        changes.append(Change(i, day, event, state_to=rng.choice(STATES) if event == "license.state_changed" else None))
    return LicenseHistory("l", "\u2026abcdef", changes)


@pytest.mark.parametrize("seed", range(4))
def test_the_one_owner_path_counts_what_the_owner_walk_counts(seed):
    rng = random.Random(seed)
    for _ in range(2500):
        history = random_history(rng)
        today = date(2026, 11, 1) + timedelta(days=rng.randrange(-5, 40))
        issued = history.changes[0]
        first, last = max(NOVEMBER.start, issued.on), min(NOVEMBER.end, today)
        expected = _owned_days(history, issued, first, last) if first <= last else {}
        assert billable_days(history, NOVEMBER, today) == expected, (history, today)


def test_edges_by_hand():
    def days(*changes, today=date(2026, 12, 15)):
        return billable_days(LicenseHistory("l", "k", list(changes)), NOVEMBER, today).get(("p", "c"), 0)

    issued = Change(1, date(2026, 11, 10), "license.issued", partner="p", contract="c")
    # suspended days are billable; terminated on the 20th: the 10th to the 20th, 11 days
    assert days(issued, Change(2, date(2026, 11, 12), "license.suspended"),
                Change(3, date(2026, 11, 20), "license.terminated")) == 11
    # issued and terminated the same day: that day alone
    assert days(issued, Change(2, date(2026, 11, 10), "license.terminated")) == 1
    # terminated before the period: nothing in it
    before = Change(1, date(2026, 10, 1), "license.issued", partner="p", contract="c")
    assert days(before, Change(2, date(2026, 10, 5), "license.terminated")) == 0
    # a trial from the 10th, active from the 15th, today the 20th: the 15th to the 20th
    assert days(issued, Change(2, date(2026, 11, 10), "license.state_changed", state_to="trial"),
                Change(3, date(2026, 11, 15), "license.state_changed", state_to="active"),
                today=date(2026, 11, 20)) == 6
    # expired then (a correction) active again the same day: the day counts once
    assert days(issued, Change(2, date(2026, 11, 25), "license.state_changed", state_to="expired"),
                Change(3, date(2026, 11, 25), "license.state_changed", state_to="active")) == 21
