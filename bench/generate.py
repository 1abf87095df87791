"""Fill a Slipway database with licenses and ledger events for the ``licensing`` benchmark.

``python -m bench.generate --url sqlite:///path --licenses N --events M`` initialises the
database through ``python -m app.cli.main`` (``init``, one partner, a write token, a contract),
then bulk-inserts, directly with peewee, N licenses spread over N/20 customers and M ledger
events; prints one JSON document (ids, token, counts, seconds).

The data is deterministic for a given ``--seed`` (only the reference time, "now", moves):
  * customers ``C-1001..``, licenses ``L-1001..`` (the ``human_id_counter`` rows are moved
    past them, so the API keeps handing out unique humanIds);
  * license states mostly ``active``; editions web-host / web-pro / power-user;
    ``issued_at`` spread over the past year;
  * events with increasing ``at`` over the past year, ~5% without ``customer_id`` (the
    ledger reaches those through the customer's licenses);
  * one "hot" customer (the first one) owns ``--hot-events`` events (default 7000, the
    same at every size), more than the 5000 rows an activity export returns.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

from bench.servers import cli

HUMAN_ID_BASE = 1000  # migrations start every counter at 1000; the first id handed out is 1001
LICENSES_PER_CUSTOMER = 20
HOT_EVENTS = 7000
BATCH = 5000
STATES = (("active", 80), ("suspended", 7), ("trial", 5), ("terminated", 5), ("expired", 3))
EDITIONS = (("web-host", 50), ("web-pro", 35), ("power-user", 15))
EVENTS = (("license.edition_changed", 25), ("license.suspended", 20), ("license.resumed", 20),
          ("license.state_changed", 15), ("license.issued", 10), ("license.terminated", 5),
          ("license.transferred_in", 3), ("license.transferred_out", 2))
NULL_CUSTOMER_SHARE = 0.05


def weighted(rng: random.Random, table, count: int) -> list:
    values, weights = zip(*table)
    return rng.choices(values, weights=weights, k=count)


def uuid4(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def batch_size(columns: int) -> int:
    """~5000 rows per INSERT, fewer when SQLite would run out of bound parameters."""
    try:
        limit = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except Exception:  # noqa: BLE001 - old Python: assume the conservative historic default
        limit = 999
    return max(1, min(BATCH, limit // columns))


def insert(db, model, fields, rows) -> None:
    size = batch_size(len(fields))
    with db.atomic():
        for start in range(0, len(rows), size):
            model.insert_many(rows[start:start + size], fields=fields).execute()


def event_data(rng: random.Random, partner_id: str, contract_id: str, customer_ids: list, now: datetime) -> dict:
    """A few JSON texts per event type, shaped like the ones Slipway writes; chosen at random
    (license.issued is written per license: it carries the license's edition and keyMasked)."""
    editions = [e for e, _ in EDITIONS]
    transfers = []
    for _ in range(8):  # moves between customers of the one partner, under the one contract
        source, target = rng.sample(customer_ids, 2) if len(customer_ids) > 1 else (customer_ids * 2)
        transfers.append({"transferId": uuid4(rng), "effectiveDate": (now - timedelta(days=rng.randrange(365)))
                          .date().isoformat(), "fromPartnerId": partner_id, "fromCustomerId": source,
                          "fromContractId": contract_id, "toPartnerId": partner_id, "toCustomerId": target,
                          "toContractId": contract_id})
    options = {
        "license.suspended": [{"from": "active"}, {"from": "trial"}],
        "license.resumed": [{}],
        "license.terminated": [{"from": s} for s in ("active", "suspended", "trial")],
        "license.edition_changed": [{"from": a, "to": b} for a in editions for b in editions if a != b],
        "license.state_changed": [{"from": "trial", "to": "active"}, {"from": "active", "to": "expired"}],
        "license.transferred_out": transfers,
        "license.transferred_in": transfers,
    }
    return {event: [json.dumps(d, sort_keys=True, separators=(",", ":")) for d in choices]
            for event, choices in options.items()}


def prepare(env: dict) -> dict:
    """Schema, partner, write token and contract, all through the operator CLI."""
    cli(env, "init")
    partner = cli(env, "partner", "create", "--name", "bench")
    token = cli(env, "token", "create", "--partner", partner["id"], "--label", "b", "--scope", "write")
    contract = cli(env, "contract", "create", "--partner", partner["id"], "--model", "per_instance_metered",
                   "--currency", "EUR", "--unit-price-cents", "1000")
    return {"partnerId": partner["id"], "token": token["token"], "contractId": contract["id"]}


def fill(url: str, partner_id: str, contract_id: str, licenses: int, events: int, seed: int,
         hot_events: int) -> dict:
    from app.storage.store import Store

    rng = random.Random(seed)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    year = timedelta(days=365)
    n_customers = max(1, licenses // LICENSES_PER_CUSTOMER)
    hot_events = min(hot_events, events)
    seconds = {}

    store = Store(url, threads=1)
    m, db = store.models, store.db
    try:
        with db.connection_context():
            if urlsplit(url).scheme == "sqlite":
                # this connection only: the data is thrown away if the machine dies meanwhile
                db.execute_sql("PRAGMA synchronous=OFF")
                db.execute_sql("PRAGMA cache_size=-262144")  # 256 MiB, for the random-order index inserts

            # --- customers -------------------------------------------------------------
            started = time.perf_counter()
            customer_ids = [uuid4(rng) for _ in range(n_customers)]
            created = now - year - timedelta(days=1)
            C = m.Customer
            rows = [(cid, f"C-{HUMAN_ID_BASE + 1 + i}", partner_id, f"Bench customer {i + 1}",
                     f"ext-{i + 1}", f"bench{i + 1}@example.test", created + timedelta(seconds=i))
                    for i, cid in enumerate(customer_ids)]
            insert(db, C, [C.id, C.human_id, C.partner, C.name, C.external_ref, C.email, C.created_at], rows)
            seconds["customers"] = time.perf_counter() - started

            # --- licenses: license i belongs to customer i % n_customers ---------------
            started = time.perf_counter()
            L = m.License
            license_ids = [uuid4(rng) for _ in range(licenses)]
            license_customer = [customer_ids[i % n_customers] for i in range(licenses)]
            states = weighted(rng, STATES, licenses)
            editions = weighted(rng, EDITIONS, licenses)
            alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
            rows = []
            for i, lid in enumerate(license_ids):
                issued = now - timedelta(seconds=rng.randrange(int(year.total_seconds())))
                terminated = issued + timedelta(days=rng.randrange(1, 30)) if states[i] == "terminated" else None
                key_tail = "".join(rng.choices(alphabet, k=6))
                rows.append((lid, f"L-{HUMAN_ID_BASE + 1 + i}", partner_id, license_customer[i], contract_id,
                             uuid4(rng), "\u2026" + key_tail, editions[i], states[i], "", "", issued, terminated))
            insert(db, L, [L.id, L.human_id, L.partner, L.customer, L.contract, L.license_service_license_id,
                           L.key_masked, L.edition, L.state, L.external_billing_ref, L.metadata, L.issued_at,
                           L.terminated_at], rows)
            # what Slipway writes into license.issued, from the license itself
            issued_data = {row[0]: json.dumps({"contractId": contract_id, "edition": row[7], "keyMasked": row[6]},
                                              sort_keys=True, separators=(",", ":")) for row in rows}
            del rows
            seconds["licenses"] = time.perf_counter() - started

            # --- human id counters past what is used now -------------------------------
            H = m.HumanIdCounter
            for kind, used in (("C", n_customers), ("L", licenses)):
                H.update(value=peewee_max(H.value, HUMAN_ID_BASE + used)).where(H.kind == kind).execute()

            # --- ledger events -----------------------------------------------------------
            started = time.perf_counter()
            E = m.LedgerEvent
            hot = customer_ids[0]
            hot_licenses = [lid for lid, cid in zip(license_ids, license_customer) if cid == hot]
            other_licenses = [lid for lid, cid in zip(license_ids, license_customer) if cid != hot] or hot_licenses
            customer_of = dict(zip(license_ids, license_customer))
            hot_positions = set(rng.sample(range(events), hot_events))
            data = event_data(rng, partner_id, contract_id, customer_ids, now)
            kinds = weighted(rng, EVENTS, events)
            step = year / max(events, 1)
            first_at = now - year
            fields = [E.event, E.at, E.actor, E.partner_id, E.customer_id, E.license_id, E.data, E.reach_customer_id]
            size = batch_size(len(fields))
            null_customer = hot_null = 0
            choice, rand = rng.choice, rng.random
            with db.atomic():
                rows = []
                for i in range(events):
                    lid = choice(hot_licenses) if i in hot_positions else choice(other_licenses)
                    kind = kinds[i]
                    if rand() < NULL_CUSTOMER_SHARE:
                        cid = None
                        null_customer += 1
                        hot_null += i in hot_positions
                    else:
                        cid = customer_of[lid]
                    text = issued_data[lid] if kind == "license.issued" else choice(data[kind])
                    rows.append((kind, first_at + step * i, None if kind == "license.state_changed" else partner_id,
                                 partner_id, cid, lid, text, customer_of[lid]))  # as the repository appends
                    if len(rows) == size:
                        E.insert_many(rows, fields=fields).execute()
                        rows = []
                if rows:
                    E.insert_many(rows, fields=fields).execute()
            seconds["events"] = time.perf_counter() - started
    finally:
        store.close()
    return {"customers": n_customers, "licenses": licenses, "events": events, "hotCustomerId": hot,
            "hotCustomerHumanId": f"C-{HUMAN_ID_BASE + 1}", "hotCustomerLicenses": len(hot_licenses),
            "hotEvents": hot_events, "hotEventsWithoutCustomerId": hot_null,
            "eventsWithoutCustomerId": null_customer, "seconds": seconds}


def peewee_max(column, value: int):
    """``MAX(column, value)`` on SQLite, ``GREATEST`` on PostgreSQL (never moves a counter back)."""
    import peewee

    db = column.model._meta.database
    name = "GREATEST" if isinstance(db, peewee.PostgresqlDatabase) else "MAX"
    return getattr(peewee.fn, name)(column, value)


def generate(url: str, licenses: int, events: int, seed: int = 1, hot_events: int = HOT_EVENTS) -> dict:
    started = time.perf_counter()
    env = dict(os.environ, SLIPWAY_DATABASE_URL=url)
    ids = prepare(env)
    cli_seconds = time.perf_counter() - started
    report = fill(url, ids["partnerId"], ids["contractId"], licenses, events, seed, hot_events)
    report["seconds"] = {"cli": cli_seconds, **report["seconds"], "total": time.perf_counter() - started}
    report["seconds"] = {k: round(v, 2) for k, v in report["seconds"].items()}
    return {"url": url, **ids, "seed": seed, **report}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="sqlite:///path (a new or empty database)")
    parser.add_argument("--licenses", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--hot-events", type=int, default=HOT_EVENTS,
                        help=f"events of the hot customer ({HOT_EVENTS})")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.licenses < 1 or args.events < 0:
        parser.error("--licenses must be >= 1 and --events >= 0")
    print(json.dumps(generate(args.url, args.licenses, args.events, args.seed, args.hot_events)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
