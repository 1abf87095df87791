"""``python -m bench.explain --url sqlite:///path``: the SQL Slipway's repositories run for
the license list page and the activity export, with SQLite's ``EXPLAIN QUERY PLAN`` and
the time each statement takes (median of a few runs), on a database made by
``bench.generate``. The statements are captured from the real repository calls, not
rebuilt here. Prints text, or JSON with ``--json``."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

RUNS = 5
SUB_RESELLER = "00000000-0000-4000-8000-00000000005b"


class Capture:
    """Records every statement run through ``db.execute_sql`` while active."""

    def __init__(self, db):
        self.db, self.statements, self._original = db, [], db.execute_sql

    def __enter__(self):
        def execute_sql(sql, params=None, *args, **kwargs):
            self.statements.append((sql, tuple(params or ())))
            return self._original(sql, params, *args, **kwargs)

        self.db.execute_sql = execute_sql
        return self

    def __exit__(self, *exc):
        del self.db.execute_sql  # back to the class's method


def timed(fn, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def plan(db, sql: str, params: tuple) -> list[str]:
    """EXPLAIN QUERY PLAN as an indented tree."""
    rows = db.execute_sql("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    depth, lines = {0: -1}, []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return lines


def explain(url: str, partner_id: str | None = None, customer_id: str | None = None) -> dict:
    from app.storage.partner import licensing as repos
    from app.storage.store import Store
    from core.partner.ledger import make_filter
    from core.partner.scope import Page

    store = Store(url, threads=1)
    m, db = store.models, store.db
    out = {"url": url, "queries": []}
    try:
        with db.connection_context():
            if partner_id is None:
                partner_id = m.Partner.select(m.Partner.id).where(m.Partner.name == "bench").scalar()
            if customer_id is None:  # bench.generate's hot customer is the first one
                customer_id = m.Customer.select(m.Customer.id).where(m.Customer.human_id == "C-1001").scalar()
            out.update(partnerId=partner_id, customerId=customer_id,
                       rows={"license": m.License.select().count(), "ledger_event": m.LedgerEvent.select().count()},
                       analyzed=db.table_exists("sqlite_stat1"))
            licenses, ledger, nothing = repos.PeeweeLicenses(m), repos.PeeweeLedger(m), make_filter()
            scope = {partner_id}
            middle = ledger.for_customer_before(customer_id, nothing, None, 2500)
            before = middle[-1].id if middle else None
            cases = [
                ("license list, limit=50", lambda: licenses.list(scope, Page(50, 0))),
                ("license list, limit=50 offset=5000", lambda: licenses.list(scope, Page(50, 5000))),
                # a reseller with one sub-reseller: the subtree has two partner ids (the second
                # owns nothing here, which does not change the plan)
                ("license list, limit=50, subtree of 2 partners",
                 lambda: licenses.list(scope | {SUB_RESELLER}, Page(50, 0))),
                ("export: X-Export-Total (summary)", lambda: ledger.summary_for_customer(customer_id, nothing)),
                ("export: first batch of 1000", lambda: ledger.for_customer_before(customer_id, nothing, None, 1000)),
                ("export: a later batch of 1000 (after 2500 rows)",
                 lambda: ledger.for_customer_before(customer_id, nothing, before, 1000)),
                ("activity list, limit=50", lambda: ledger.for_customer(customer_id, nothing, Page(50, 0))),
            ]
            for label, call in cases:
                with Capture(db) as capture:
                    call()
                for sql, params in capture.statements:
                    out["queries"].append({"label": label, "sql": sql, "params": list(params),
                                           "plan": plan(db, sql, params),
                                           "sql_ms": timed(lambda: db.execute_sql(sql, params).fetchall()),
                                           "call_ms": timed(call)})
    finally:
        store.close()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.explain", description=__doc__)
    parser.add_argument("--url", required=True, help="sqlite:///path of a database made by bench.generate")
    parser.add_argument("--partner", default=None, help="partner id (default: the one named 'bench')")
    parser.add_argument("--customer", default=None, help="customer id (default: humanId C-1001, the hot one)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")
    args = parser.parse_args(argv)
    report = explain(args.url, args.partner, args.customer)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['url']}: {report['rows']['license']:,} licenses, {report['rows']['ledger_event']:,} events, "
          f"ANALYZE statistics: {'yes' if report['analyzed'] else 'no'}")
    for q in report["queries"]:
        print(f"\n== {q['label']}: SQL {q['sql_ms']:.2f} ms, repository call {q['call_ms']:.2f} ms (median of {RUNS})")
        print(q["sql"])
        print("params:", q["params"])
        print("\n".join("  " + line for line in q["plan"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
