"""Billing recompute benchmark: price a partner with 100,000 licenses and a month of events.

    python -m bench.recompute [--licenses 100000] [--small 10000]

Builds SQLite databases (or uses SLIPWAY_DATABASE_URL when it is PostgreSQL, one run),
then times, each in a fresh process so peak memory is that run's own: reading the
partner's license histories from the ledger alone (the floor any pricing pays), and the
full recompute (read, price with per_instance_metered, store the draft).
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


class FixedClock:
    def now(self):
        return NOW

    def monotonic(self):
        return time.monotonic()


def generate(url: str, licenses: int, seed: int = 7) -> str:
    """A partner with ``licenses`` licenses issued over the past two months and a month of
    suspends, resumes, terminations, expiries and transfers; returns the partner id."""
    from app.pluginmanager import license_services, make_plugin_manager
    from app.storage.store import Store
    from core.partner import contracts, partners
    from core.partner.ledger import canonical_json

    rng = random.Random(seed)
    store = Store(url, threads=1)
    store.migrate([f.migrate for f in license_services(make_plugin_manager()).values()])
    clock = FixedClock()
    p = partners.create_partner(store.uow(), clock, name="bench")
    other = partners.create_partner(store.uow(), clock, name="other", parent_id=p.id)
    known = {"per_instance_metered"}
    c1 = contracts.create_contract(store.uow(), clock, partner_id=p.id, model="per_instance_metered",
                                   currency="EUR", unit_price_cents=1299, known_models=known)
    c2 = contracts.create_contract(store.uow(), clock, partner_id=p.id, model="per_instance_metered",
                                   currency="USD", unit_price_cents=999, known_models=known)
    c3 = contracts.create_contract(store.uow(), clock, partner_id=other.id, model="per_instance_metered",
                                   currency="EUR", unit_price_cents=1500, known_models=known)
    m = store.models
    month_start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    customers, rows, events = [], [], []
    for i in range(max(1, licenses // 20)):
        customers.append({"id": str(uuid.uuid4()), "human_id": f"C-{100000 + i}", "partner": p.id,
                          "name": f"customer {i}", "created_at": NOW - timedelta(days=90)})
    for i in range(licenses):
        lid, cust = str(uuid.uuid4()), customers[i % len(customers)]["id"]
        contract = c1 if i % 3 else c2
        issued = NOW - timedelta(days=rng.randint(0, 60), seconds=rng.randint(0, 86399))
        state, owner_partner, owner_contract = "active", p.id, contract.id
        key_masked = "\u2026" + f"{i:06d}"[-6:]
        events.append((issued, "license.issued", p.id, cust, lid,
                       {"edition": "web-host", "contractId": contract.id, "keyMasked": key_masked}))
        when = max(issued, month_start) + timedelta(hours=rng.randint(1, 500))
        roll = rng.random()
        if when < NOW and roll < 0.20:
            events.append((when, "license.suspended", p.id, cust, lid, {"from": "active"}))
            state = "suspended"
            if rng.random() < 0.5:
                events.append((when + timedelta(days=2), "license.resumed", p.id, cust, lid, {}))
                state = "active"
        elif when < NOW and roll < 0.25:
            events.append((when, "license.terminated", p.id, cust, lid, {"from": "active"}))
            state = "terminated"
        elif when < NOW and roll < 0.27:
            events.append((when, "license.state_changed", None, cust, lid, {"from": "active", "to": "expired"}))
            state = "expired"
        elif when < NOW and roll < 0.30:
            effective = max(issued.date(), (when - timedelta(days=3)).date())
            data = {"effectiveDate": effective.isoformat(), "toPartnerId": other.id, "toContractId": c3.id,
                    "toCustomerId": cust, "fromPartnerId": p.id, "fromContractId": contract.id}
            events.append((when, "license.transferred_out", p.id, cust, lid, data))
            events.append((when, "license.transferred_in", other.id, cust, lid, data))
            owner_partner, owner_contract = other.id, c3.id
        rows.append({"id": lid, "human_id": f"L-{100000 + i}", "partner": owner_partner, "customer": cust,
                     "contract": owner_contract, "license_service_license_id": str(uuid.uuid4()),
                     "key_masked": key_masked, "edition": "web-host", "state": state,
                     "issued_at": issued})
    events.sort(key=lambda e: e[0])
    with store.db.connection_context():
        with store.db.atomic():
            for start in range(0, len(customers), 2000):
                m.Customer.insert_many(customers[start:start + 2000]).execute()
            for start in range(0, len(rows), 2000):
                m.License.insert_many(rows[start:start + 2000]).execute()
            for start in range(0, len(events), 5000):
                m.LedgerEvent.insert_many([
                    {"at": at, "event": ev, "actor": actor, "partner_id": actor or p.id, "customer_id": cust,
                     "license_id": lid, "data": canonical_json(data)}
                    for at, ev, actor, cust, lid, data in events[start:start + 5000]]).execute()
    store.close()
    return p.id, len(events)


def measure(url: str, partner_id: str, what: str) -> dict:
    """One run in this process: ``histories`` (read only) or ``recompute`` (full)."""
    from app.pluginmanager import billing_models, make_plugin_manager
    from app.storage.store import Store
    from core.partner import statements

    store = Store(url, threads=1)
    models = billing_models(make_plugin_manager())
    started = time.perf_counter()
    if what == "histories":
        with store.uow(write=False) as uow:
            found = len(uow.ledger.histories_for_partner(partner_id))
        result = {"licenses": found}
    else:
        done = statements.recompute(store.uow(), FixedClock(), models, partner_id=partner_id)
        seconds = time.perf_counter() - started  # the recompute; reading its draft back only checks it
        with store.uow(write=False) as uow:
            draft = uow.statements.draft(partner_id, __import__("core.partner.billing").partner.billing.Period.containing(NOW.date()))
        result = {"lines": len(draft.lines), "detail": sum(len(line.detail) for line in draft.lines),
                  "totals": [list(t) for t in draft.totals], "partners": len(done["partners"])}
    if what == "histories":
        seconds = time.perf_counter() - started
    store.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"what": what, "seconds": round(seconds, 3), "peak_rss_mb": round(peak_mb, 1), **result}


def _in_fresh_process(url, partner_id, what) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.recompute", "--measure", what, "--url", url,
                          "--partner", partner_id], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recompute")
    parser.add_argument("--licenses", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--measure", choices=["histories", "recompute"])
    parser.add_argument("--url")
    parser.add_argument("--partner")
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.url, args.partner, args.measure)))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (args.small, args.licenses):
            url = f"sqlite:///{tmp}/recompute-{n}.db"
            started = time.perf_counter()
            partner_id, events = generate(url, n)
            built = time.perf_counter() - started
            floor = _in_fresh_process(url, partner_id, "histories")
            full = _in_fresh_process(url, partner_id, "recompute")
            results.append({"licenses": n, "events": events, "generated_s": round(built, 1), "read_only": floor,
                            "recompute": full})
    print("billing recompute of one partner, November 2026, per_instance_metered, SQLite (WAL), one core")
    print(f"{'licenses':>9} {'events':>8} {'read histories s':>17} {'recompute s':>12} "
          f"{'peak RSS MB (read / full)':>27} {'priced licenses':>16}")
    for r in results:
        print(f"{r['licenses']:>9} {r['events']:>8} {r['read_only']['seconds']:>17.3f} "
              f"{r['recompute']['seconds']:>12.3f} "
              f"{r['read_only']['peak_rss_mb']:>12.1f} / {r['recompute']['peak_rss_mb']:<12.1f} "
              f"{r['recompute']['detail']:>16}")
    print("aim: recompute of 100,000 licenses under 2 s on one core")
    print(json.dumps({"recompute": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
