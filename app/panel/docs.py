"""``GET /api/docs``: the interactive browser documentation of the panel contract.

Swagger UI 5 (it renders OpenAPI 3.1) comes from the ``swagger-ui-py`` package, whose
wheel carries the built Swagger UI assets; Slipway serves only the assets the page needs,
from that package, behind the same authentication as every ``/api`` endpoint (a browser
sends its session cookie, scripts their key). The page loads the contract from
``/api/openapi.yaml``. Nothing is fetched from a CDN, so the docs work offline.
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

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Slipway panel API</title>
  <link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
  <link rel="stylesheet" href="/api/docs/assets/index.css">
  <link rel="icon" type="image/png" href="/api/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/api/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/api/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "/api/openapi.yaml", dom_id: "#swagger-ui", deepLinking: true,
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
      layout: "StandaloneLayout", withCredentials: true
    });
  </script>
</body>
</html>
"""


def _static_dir() -> Path:
    import swagger_ui

    return Path(swagger_ui.__file__).parent / "static"


@lru_cache(maxsize=len(ASSETS))
def _asset(name: str) -> bytes:
    return (_static_dir() / name).read_bytes()


def docs_handlers() -> dict:
    for name in ASSETS:  # read once, at start-up, not on the event loop of the first request
        _asset(name)

    async def get_docs(call):
        return Reply(200, PAGE, content_type="text/html; charset=utf-8",
                     headers={"Cache-Control": "no-store"})

    async def get_docs_asset(call):
        name = call.params["asset"]
        # the contract's enum already refuses other names; the check stays for defence in depth
        if name not in ASSETS:
            from core.errors import NotFound

            raise NotFound(f"no documentation asset {name!r}")
        return Reply(200, _asset(name), content_type=ASSETS[name],
                     headers={"Cache-Control": "private, max-age=86400"})

    return {"getPanelDocs": get_docs, "getPanelDocsAsset": get_docs_asset}
