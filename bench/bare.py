"""The baseline: a bare Falcon ASGI app answering ``GET /v1/me`` with a constant document."""
import falcon.asgi

ME = {"partnerId": "00000000-0000-0000-0000-000000000000", "name": "bench", "type": "reseller", "scope": "write"}


class Me:
    async def on_get(self, req, resp):
        resp.media = ME


app = falcon.asgi.App()
app.add_route("/v1/me", Me())
