"""The floor of ``python -m bench lists``: a bare Falcon ASGI app that answers
``GET /v1/licenses?limit=50`` and ``GET /api/services`` by running the same SQL Slipway runs
for them (the credential's lookup, the page's statements) on the same database, with one
sqlite3 connection and nothing else: no worker thread, no rate limit, no log line, no
contract. The SQL text comes from Slipway's own repositories (``Statements``) where they
build it once."""
import os
import sqlite3
from urllib.parse import urlsplit

import falcon.asgi
import orjson

from app.storage.store import Store
from core.partner.scope import Page

URL = os.environ["SLIPWAY_DATABASE_URL"]
PARTNER = os.environ["BENCH_PARTNER_ID"]
_store = Store(URL, threads=1)
with _store.uow(transaction=False, write=False) as _uow:  # Slipway's statements, built as it builds them
    _uow.tokens.by_hash_with_partner("-")
    _uow.partners.subtree_ids(PARTNER)
    _uow.licenses.list({PARTNER}, Page(limit=50, offset=0))
    _uow.api_keys.get("-")
    _uow.services.page(page=1, per_page=20, status=None, customer_id="-", sort="created_at", order="asc",
                       search=None)
_sql = _store.models.statements.sql
TOKEN_SQL, SUBTREE_SQL = _sql("token-by-hash", None), _sql("partner-subtree", None)
LICENSES_SQL, KEY_SQL = _sql("licenses:1:", None), _sql("panel-key-by-id", None)
SERVICES_PAGE = _sql("services:customer:created_at:asc", None)
_store.close()
db = sqlite3.connect(urlsplit(URL).path, check_same_thread=False, isolation_level=None)
LICENSE_KEYS = ("id", "humanId", "partnerId", "customerId", "contractId", "licenseServiceLicenseId", "keyMasked",
                "edition", "state", "issuedAt", "externalBillingRef", "metadata", "terminatedAt")


def stamp(value):
    return None if value is None else value.replace(" ", "T")[:26] + "Z"


class Licenses:
    async def on_get(self, req, resp):
        import hashlib
        secret = (req.get_header("Authorization") or "").partition(" ")[2]
        db.execute(TOKEN_SQL, (hashlib.sha256(secret.encode()).hexdigest(),)).fetchall()
        scope = [row[0] for row in db.execute(SUBTREE_SQL, (PARTNER,))]
        rows = db.execute(LICENSES_SQL, (*scope, 50, 0)).fetchall()
        data = [dict(zip(LICENSE_KEYS, row[:9] + (stamp(row[9]),) + row[10:12] + (stamp(row[12]),))) for row in rows]
        resp.data = orjson.dumps({"data": data, "limit": 50, "offset": 0})
        resp.content_type = falcon.MEDIA_JSON


class Services:
    async def on_get(self, req, resp):
        key_id = (req.get_header("Authorization") or "").partition(" ")[2].split("_")[1]
        customer = db.execute(KEY_SQL, (key_id,)).fetchall()[0][8]
        rows = db.execute(SERVICES_PAGE, (customer, customer, 20, 0)).fetchall()  # the total: a column of each row
        total = rows[0][9] if rows else 0
        data = [{"id": r[0], "name": r[1], "status": r[2], "url": r[3], "customer_id": r[4], "template": r[5],
                 "deploy_method": r[6], "created_at": stamp(r[7]), "updated_at": stamp(r[8]),
                 "resources": {"cpu_usage": 0.0, "memory_usage_mb": 0.0, "memory_limit_mb": 0.0}} for r in rows]
        resp.data = orjson.dumps({"data": data, "total": total, "page": 1, "per_page": 20})
        resp.content_type = falcon.MEDIA_JSON


app = falcon.asgi.App()
app.add_route("/v1/licenses", Licenses())
app.add_route("/api/services", Services())
