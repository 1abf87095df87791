"""``GET /api/docs`` and ``GET /v1/docs``: the interactive browser documentation of the
panel and the partner contracts.

Swagger UI 5 (it renders OpenAPI 3.1) comes from the ``swagger-ui-py`` package, whose
wheel carries the built Swagger UI assets; Slipway serves only the assets the page needs,
from that package. The panel's page and assets sit behind the same authentication as
every ``/api`` endpoint (a browser sends its session cookie, scripts their key; a browser
signed out is sent to the sign-in, ``app.panel.gate``) and load ``/api/openapi.yaml``; the
partner's need no token, like ``/v1/openapi.yaml``, which they load. Nothing is fetched
from a CDN, so the docs work offline.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from app.http.pipeline import Reply

ASSETS = {  # served name -> content type
    "swagger-ui.css": "text/css; charset=utf-8",
    "index.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
    "favicon-32x32.png": "image/png",
}

PAGE_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{title}</title>
  <link rel="stylesheet" href="{base}/docs/assets/swagger-ui.css">
  <link rel="stylesheet" href="{base}/docs/assets/index.css">
  <link rel="icon" type="image/png" href="{base}/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{base}/docs/assets/swagger-ui-bundle.js"></script>
  <script src="{base}/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{
      url: "{base}/openapi.yaml", dom_id: "#swagger-ui", deepLinking: true,
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
      layout: "StandaloneLayout", withCredentials: true
    }});
  </script>
</body>
</html>
"""


DOCS = {  # api -> (title, path prefix, operation ids of the page and of its assets)
    "panel": ("Slipway panel API", "/api", ("getPanelDocs", "getPanelDocsAsset")),
    "partner": ("Slipway partner API", "/v1", ("getPartnerDocs", "getPartnerDocsAsset")),
}


def _static_dir() -> Path:
    import swagger_ui

    return Path(swagger_ui.__file__).parent / "static"


@lru_cache(maxsize=len(ASSETS))
def _asset(name: str) -> bytes:
    return (_static_dir() / name).read_bytes()


def docs_handlers(api: str = "panel") -> dict:
    """The page and asset handlers of ``api``'s docs ("panel": ``/api``, "partner": ``/v1``)."""
    docs = DocsHandlers(api)
    return dict(zip(DOCS[api][2], (docs.get_docs, docs.get_docs_asset)))


class DocsHandlers:
    """One API's documentation page (its title and path prefix filled in once) and the
    Swagger UI assets it loads, read once at start-up, not on the event loop of the first
    request."""

    def __init__(self, api: str):
        for name in ASSETS:
            _asset(name)
        title, base, _ = DOCS[api]
        self.page = PAGE_TEMPLATE.format(title=title, base=base)
        # the panel's page follows the session; the partner's is the same for everyone
        self.cache = "no-store" if api == "panel" else "no-cache"

    async def get_docs(self, call):
        return Reply(200, self.page, content_type="text/html; charset=utf-8", headers={"Cache-Control": self.cache})

    async def get_docs_asset(self, call):
        name = call.params["asset"]
        # the contract's enum already refuses other names; the check stays for defence in depth
        if name not in ASSETS:
            from core.errors import NotFound

            raise NotFound(f"no documentation asset {name!r}")
        return Reply(200, _asset(name), content_type=ASSETS[name],
                     headers={"Cache-Control": "private, max-age=86400"})
