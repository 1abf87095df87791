"""The one error-mapping layer: domain errors and HTTP failures to each API's format.

Partner API (``/v1``): exactly ``{"error": {"code", "message"}}`` with dash codes.
Panel API (everything else): underscore codes, optional ``details`` and ``fields``.
"""
from __future__ import annotations

import json
import logging

import falcon
import peewee

from core.errors import Conflict, DomainError, Forbidden, Invalid, NotFound, Unauthorized
from ports.backups import DestinationError
from ports.licensing import LicenseServiceError
from ports.runtime import EngineError

log = logging.getLogger("slipway.errors")

PARTNER_CODES = {
    400: "bad-request", 401: "unauthorized", 403: "forbidden", 404: "not-found", 405: "method-not-allowed",
    409: "conflict", 413: "payload-too-large", 415: "unsupported-media-type", 422: "unprocessable-entity",
    429: "too-many-requests", 500: "internal-error", 503: "service-unavailable",
}
# docs/decisions.md fixes the panel's codes at eight; the statuses it does not name take the
# nearest: a wrong method, an oversized body or a wrong media type is a bad request, and a
# dependency that failed (503) is the server's failure, not the client's; one 503 has a code
# of its own: ``engine_unavailable`` (no engine configured, or it does not answer its ping:
# app.engine_gate), which an ApiError carries in ``code``.
PANEL_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "bad_request",
    409: "conflict", 413: "bad_request", 415: "bad_request", 422: "validation_error",
    429: "rate_limited", 500: "internal_error", 503: "internal_error",
}
DOMAIN_STATUS = {NotFound: 404, Conflict: 409, Invalid: 422, Forbidden: 403, Unauthorized: 401}
RATE_LIMIT_MESSAGE = "rate limit exceeded"

# a refused credential of the other API: its 401 says so (the code stays `unauthorized`)
PANEL_KEY_ON_PARTNER_API = ("this is a panel API key (slw_...), the credential of the panel API (/api): "
                            "the partner API (/v1) takes a partner token, Authorization: Bearer pcp_...")
PARTNER_TOKEN_ON_PANEL_API = ("this is a partner token (pcp_...), the credential of the partner API (/v1): "
                              "the panel API (/api) takes an API key, Authorization: Bearer slw_<key_id>_<secret>")


def unauthorized_message(api: str, message: str, credential: str | None) -> str:
    """The 401's ``message`` for ``credential`` refused by ``api`` ("partner" or "panel"),
    with what it is when it is the other API's (a panel key's ``slw_`` prefix, a partner
    token's ``pcp_``)."""
    credential = (credential or "").strip()
    if api == "partner" and credential.startswith("slw_"):
        return f"{message}: {PANEL_KEY_ON_PARTNER_API}"
    if api == "panel" and credential.startswith("pcp_"):
        return f"{message}: {PARTNER_TOKEN_ON_PANEL_API}"
    return message


class ApiError(Exception):
    """An HTTP error with the parts both formats need."""

    def __init__(self, status: int, message: str, *, fields: dict | None = None, details: str | None = None,
                 headers: dict | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code  # the panel's code when not the status's (PANEL_CODES): engine_unavailable
        self.message = message
        self.fields = fields or {}
        self.details = details
        self.headers = headers or {}


def api_of(path: str) -> str:
    return "partner" if path == "/v1" or path.startswith("/v1/") else "panel"


def error_body(api: str, status: int, message: str, fields: dict | None = None, details: str | None = None,
               code: str | None = None):
    if api == "partner":
        if fields and status == 422:
            message = message + ": " + "; ".join(f"{k} {v}" if k else v for k, v in fields.items())
        return {"error": {"code": PARTNER_CODES.get(status, "internal-error"), "message": message}}
    error = {"code": code or PANEL_CODES.get(status, "internal_error"), "message": message}
    if details:
        error["details"] = details
    if fields:
        error["fields"] = fields
    return {"error": error}


def render_error(api: str, err: ApiError) -> bytes:
    """The body of ``err`` as ``api`` sends it (also what an idempotent POST keeps)."""
    return json.dumps(error_body(api, err.status, err.message, err.fields, err.details,
                                 getattr(err, "code", None))).encode("utf-8")


def to_api_error(ex: Exception) -> ApiError:
    if isinstance(ex, ApiError):
        return ex
    if isinstance(ex, DomainError):
        status = next(code for cls, code in DOMAIN_STATUS.items() if isinstance(ex, cls))
        return ApiError(status, ex.message, fields=ex.fields)
    if isinstance(ex, LicenseServiceError):
        log.warning("license service failed: %s", ex)
        return ApiError(503, f"the license service failed, nothing was changed: {ex}")
    if isinstance(ex, EngineError):
        log.warning("container engine failed: %s", ex)
        return ApiError(503, f"the container engine failed: {ex}")
    if isinstance(ex, DestinationError):
        log.warning("backup destination failed: %s", ex)
        return ApiError(503, f"the backup destination failed, nothing was changed: {ex}")
    if isinstance(ex, peewee.OperationalError) and "locked" in str(ex):
        log.warning("database busy: %s", ex)
        return ApiError(503, "the database is busy, retry shortly", headers={"Retry-After": "1"})
    if isinstance(ex, falcon.HTTPError):
        status = ex.status_code
        message = {404: "no such route", 405: "method not allowed for this route"}.get(
            status, ex.title or "request failed")
        headers = dict(ex.headers or {})
        if status not in PANEL_CODES:
            status = 400 if status < 500 else 500
        return ApiError(status, message, headers=headers)
    log.error("unhandled error", exc_info=ex)
    return ApiError(500, "internal server error")


def write_error(req, resp, err: ApiError) -> None:
    resp.status = err.status
    for name, value in getattr(req.context, "rate_headers", {}).items():  # errors carry them too
        resp.set_header(name, value)
    for name, value in err.headers.items():
        resp.set_header(name, value)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = render_error(api_of(req.path), err)


async def handle_any_error(req, resp, ex, params, ws=None):
    """Falcon error handler for everything: no HTML page, no stack trace to the client."""
    if ws is not None:  # a WebSocket upgrade (e.g. to an unknown route)
        await refuse_websocket(req, ws, to_api_error(ex))
        return
    write_error(req, resp, to_api_error(ex))


#: ASGI scope key of the handshake refusal (``SlipwayApp`` sets it when the server
#: supports the ``websocket.http.response`` extension, as uvicorn does)
DENY_KEY = "slipway.deny_handshake"


async def refuse_websocket(req, ws, err: ApiError) -> None:
    """Refuse or end a WebSocket for ``err``. Before it is accepted the handshake gets an
    HTTP answer: ``err.status`` with the API's JSON error body and the rate-limit headers
    (docs/decisions.md); on a server without the denial-response extension the close code is
    3000 + status (the server answers the handshake 403). After acceptance: close code
    1008 (policy violation) for a 4xx, 1011 for a server error, with the message as reason."""
    if ws.closed:
        return
    if ws.unaccepted:
        deny = req.scope.get(DENY_KEY)
        if deny is not None:
            headers = {**getattr(req.context, "rate_headers", {}), **err.headers}
            await deny(err.status, headers, render_error(api_of(req.path), err))
            return
        await ws.close(3000 + err.status, err.message[:120])
        return
    await ws.close(1011 if err.status >= 500 else 1008, err.message[:120])


class HandshakeDenial:
    """Wraps an ASGI ``send`` of a WebSocket scope: ``deny`` answers the handshake with
    an HTTP response (ASGI ``websocket.http.response.*``); what Falcon sends after it (its
    own close of the never-accepted socket) is dropped."""

    def __init__(self, send):
        self._send = send
        self.denied = False

    async def send(self, message):
        if self.denied:
            return
        await self._send(message)

    async def deny(self, status: int, headers: dict, body: bytes) -> None:
        self.denied = True
        raw = [(name.lower().encode("latin-1"), str(value).encode("latin-1")) for name, value in headers.items()]
        raw += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await self._send({"type": "websocket.http.response.start", "status": status, "headers": raw})
        await self._send({"type": "websocket.http.response.body", "body": body})
