"""The baseline: a bare Falcon ASGI app answering with constant documents: ``GET /v1/me``,
and ``GET /v1/licenses`` with a page of 50 licenses shaped like Slipway's (serialised per
request, as Slipway does, but nothing is read or checked)."""
import falcon.asgi

ME = {"partnerId": "00000000-0000-0000-0000-000000000000", "name": "bench", "type": "reseller", "scope": "write"}
LICENSE = {"id": "00000000-0000-4000-8000-000000000000", "humanId": "L-1001",
           "partnerId": "00000000-0000-0000-0000-000000000000", "customerId": "00000000-0000-4000-8000-000000000001",
           "contractId": "00000000-0000-4000-8000-000000000002",
           "licenseServiceLicenseId": "00000000-0000-4000-8000-000000000003", "keyMasked": "\u2026ABCDEF",
           "edition": "web-host", "state": "active", "externalBillingRef": "", "metadata": "",
           "issuedAt": "2026-01-01T00:00:00Z", "terminatedAt": None}
LICENSES = {"data": [dict(LICENSE, humanId=f"L-{1001 + i}") for i in range(50)], "limit": 50, "offset": 0}


class Me:
    async def on_get(self, req, resp):
        resp.media = ME


class Licenses:
    async def on_get(self, req, resp):
        resp.media = LICENSES


app = falcon.asgi.App()
app.add_route("/v1/me", Me())
app.add_route("/v1/licenses", Licenses())
