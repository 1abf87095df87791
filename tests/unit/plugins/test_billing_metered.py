"""per_instance_metered, priced by hand: every expected amount below is worked out in the
comment above it, not by calling the code under test."""
from datetime import date, datetime, timezone
from decimal import Decimal

from core.partner.billing import Change, LicenseHistory, Period, round_half_up
from core.partner.contracts import Contract
from plugins.billing_metered import PerInstanceMetered

P, Q = "partner-p", "partner-q"
NOV = Period.containing(date(2026, 11, 5))  # 30 days
MODEL = PerInstanceMetered()


def contract(cid="c1", partner=P, cents=3000, currency="EUR"):
    return Contract(id=cid, partner_id=partner, model=MODEL.name, currency=currency, unit_price_cents=cents,
                    created_at=datetime(2026, 1, 1, tzinfo=timezone.utc))


def history(*changes, lid="lic-1"):
    return LicenseHistory(license_id=lid, key_masked="\u2026abcdef", changes=list(changes))


def issued(on, partner=P, contract_id="c1", i=1):
    return Change(i, on, "license.issued", partner=partner, contract=contract_id)


def event(i, on, name, **kw):
    return Change(i, on, name, **kw)


def price(c, hist, period=NOV, today=date(2026, 12, 15)):
    return MODEL.price(c, period, hist if isinstance(hist, list) else [hist], today)


def test_issue_mid_month():
    # issued Nov 16: days 16..30 = 15; 3000 * 15 / 30 = 1500
    line = price(contract(), history(issued(date(2026, 11, 16))))
    assert [(d.days, d.amount_cents) for d in line.detail] == [(15, 1500)]
    assert line.amount_cents == 1500 and line.quantity == Decimal("0.5000")


def test_suspended_days_are_billed_and_resume_changes_nothing():
    # active, suspended from the 10th, resumed on the 20th: all 30 days billable -> 3000
    h = history(issued(date(2026, 10, 1)), event(2, date(2026, 11, 10), "license.suspended"),
                event(3, date(2026, 11, 20), "license.resumed"))
    assert price(contract(), h).amount_cents == 3000


def test_termination_day_is_billed():
    # days 1..10 (terminated during the 10th) = 10; 3000 * 10 / 30 = 1000
    h = history(issued(date(2026, 10, 1)), event(2, date(2026, 11, 10), "license.terminated"))
    line = price(contract(), h)
    assert line.detail[0].days == 10 and line.amount_cents == 1000


def test_expiry_day_is_billed_and_later_days_are_not():
    # expired during the 5th: days 1..5 = 5; 3000 * 5 / 30 = 500
    h = history(issued(date(2026, 10, 1)),
                event(2, date(2026, 11, 5), "license.state_changed", state_to="expired"))
    assert price(contract(), h).amount_cents == 500


def test_trial_days_are_not_billed():
    # issued the 1st and in trial by the end of that day; active from the 11th:
    # days 11..30 = 20; 3000 * 20 / 30 = 2000
    h = history(issued(date(2026, 11, 1)), event(2, date(2026, 11, 1), "license.state_changed", state_to="trial"),
                event(3, date(2026, 11, 11), "license.state_changed", state_to="active"))
    line = price(contract(), h)
    assert line.detail[0].days == 20 and line.amount_cents == 2000


def test_transfer_effective_in_the_past():
    # recorded the 20th, effective the 10th: P keeps days 1..9 = 9 -> 3000 * 9 / 30 = 900;
    # Q gets days 10..30 = 21 -> 2000 * 21 / 30 = 1400
    h = history(issued(date(2026, 10, 1)),
                event(2, date(2026, 11, 20), "license.transferred_in", effective=date(2026, 11, 10),
                      to_partner=Q, to_contract="c2"))
    assert price(contract(), h).amount_cents == 900
    q_line = price(contract("c2", Q, 2000), h)
    assert q_line.detail[0].days == 21 and q_line.amount_cents == 1400


def test_transfer_effective_today():
    # today is the 20th, effective today: P has days 1..19 = 19 -> 3000 * 19 / 30 = 1900;
    # Q has the 20th only -> 2000 * 1 / 30 = 66.67 -> 67
    today = date(2026, 11, 20)
    h = history(issued(date(2026, 10, 1)),
                event(2, today, "license.transferred_in", effective=today, to_partner=Q, to_contract="c2"))
    assert price(contract(), h, today=today).amount_cents == 1900
    assert price(contract("c2", Q, 2000), h, today=today).amount_cents == 67


def test_usage_counts_up_to_and_including_today():
    # issued before the period, today is the 12th: days 1..12 = 12; 3000 * 12 / 30 = 1200
    line = price(contract(), history(issued(date(2026, 10, 3))), today=date(2026, 11, 12))
    assert line.amount_cents == 1200 and line.quantity == Decimal("0.4000")


def test_february_and_a_31_day_month():
    # February 2026 has 28 days: issued the 15th -> days 15..28 = 14; 1000 * 14 / 28 = 500
    feb = Period.containing(date(2026, 2, 1))
    assert feb.days == 28
    assert price(contract(cents=1000), history(issued(date(2026, 2, 15))), period=feb).amount_cents == 500
    # December has 31: issued the 17th -> days 17..31 = 15; 1000 * 15 / 31 = 483.87 -> 484
    dec = Period.containing(date(2026, 12, 1))
    line = price(contract(cents=1000), history(issued(date(2026, 12, 17))), period=dec, today=date(2027, 1, 2))
    assert line.amount_cents == 484 and line.quantity == Decimal("0.4839")  # 15/31 = 0.48387...


def test_rounding_at_exactly_half_a_cent_goes_up_per_license():
    # 75 cents, one day of 30: 2.5 -> 3 (half up, not half even); two such licenses: 3 + 3 = 6,
    # not round(5.0) = 5, because each license is rounded on its own
    c = contract(cents=75)
    one_day = [history(issued(date(2026, 11, 30)), lid=f"l{i}") for i in range(2)]
    line = price(c, one_day)
    assert [d.amount_cents for d in line.detail] == [3, 3] and line.amount_cents == 6
    assert line.quantity == Decimal("0.0667")  # 2/30 = 0.06666...
    assert round_half_up(1, 2) == 1 and round_half_up(3, 2) == 2 and round_half_up(2, 3) == 1


def test_two_contracts_in_two_currencies_price_separately():
    # EUR contract 3000 for 30 days -> 3000; USD contract 1000 from the 21st -> 10 days -> 333.33 -> 333
    eur, usd = contract("c1", cents=3000, currency="EUR"), contract("c3", cents=1000, currency="USD")
    licenses = [history(issued(date(2026, 10, 1), contract_id="c1"), lid="a"),
                history(issued(date(2026, 11, 21), contract_id="c3"), lid="b")]
    assert (price(eur, licenses).currency, price(eur, licenses).amount_cents) == ("EUR", 3000)
    assert (price(usd, licenses).currency, price(usd, licenses).amount_cents) == ("USD", 333)


def test_nothing_before_issue_or_after_the_period():
    assert price(contract(), history(issued(date(2026, 12, 3)))).detail == ()
    assert price(contract(), history()).detail == ()
