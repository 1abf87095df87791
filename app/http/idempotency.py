"""``Idempotency-Key`` on every POST of both APIs (docs/decisions.md, "Automation").

A client that may send a POST twice (a timeout, a retry after a dropped connection)
names it with a key; the first request with that key runs, and the same request again
within 24 h gets the first one's answer back, marked ``Idempotent-Replayed: true``,
without running again. The pipeline (``app.http.pipeline``) calls ``Idempotency.run``
around the handler of a POST once the gate admitted the caller and the body and
parameters are valid, so only a request that would run can claim a key.

- Keys belong to the credential that sent them: a partner token (``token:<id>``), a
  panel API key (``key:<id>``) or a browser session (``session:<id>``). A POST without
  credentials (the sign-in, logout) ignores the header.
- The request is its method, its path and a hash of its body *as JSON*: the parsed body
  re-serialised with sorted keys and no whitespace, so the same object sent with other
  spacing or key order is the same request (a client that re-encodes its retry still gets
  the replay), while any change of a value is another request.
- A key's first request claims it with an insert the database's unique index decides
  (``app.storage.idempotency_repos``), so one request runs whichever process or thread
  each repeat reaches. A repeat while it runs is 409 ``conflict`` (``Retry-After: 1``); a
  key used for another method, path or body is 422 ``unprocessable-entity`` (partner) or
  409 ``conflict`` (panel).
- Kept answers: every status but 429 and 5xx, error answers included, as they were sent
  (status, body, content type and the answer's own headers such as ``Location``; the
  rate-limit headers are the repeat's own). A 429 or 5xx answer drops the claim, so a
  retry runs again.
- A kept body is sealed (AES-GCM) with a key derived from the credential's own secret as
  the request presents it (the token, the API key or the session cookie), which only the
  credential's holder has: the answer of ``POST /v1/tokens`` or ``/api/v1/api-keys`` holds
  a new secret that the database otherwise keeps only as a hash, and a copy of the
  database must not hand it out. A caller an auth source signed in presents no such
  secret: its answers are sealed with a key derived from the server's own key
  (``presented_secret``).
- A claim still in flight after ``STALE`` (its process presumably died before it could
  answer) is taken over by the next repeat of the same request, which runs it again.
- After ``TTL`` a key is free again: its record is treated as absent and a clean-up job
  (``app.workers.idempotency``) deletes it.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import replace
from datetime import timedelta

import falcon
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app.http.errors import ApiError, render_error, to_api_error
from app.http.pipeline import Reply, kept_reply
from app.partner.gate import bearer
from app.storage.idempotency_repos import PeeweeIdempotencyKeys
from core.panel.access import Principal, SourcePrincipal
from core.panel.sessions import SessionPrincipal
from core.partner.identity import Caller

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
MAX_LENGTH = 255
TTL = timedelta(hours=24)
STALE = timedelta(minutes=5)

log = logging.getLogger("slipway.idempotency")


def credential_of(caller) -> str | None:
    """Whose keys these are: the token, the API key or the browser session (a key session
    is a session of its own, not its key); None without credentials."""
    if isinstance(caller, Caller):
        return "token:" + caller.token.id
    if isinstance(caller, SessionPrincipal):
        return "session:" + caller.session.id
    if isinstance(caller, SourcePrincipal):
        return "source:" + caller.source + ":" + caller.subject
    if isinstance(caller, Principal):
        return "key:" + caller.key.id
    return None


def presented_secret(req, caller, server_key: bytes | None = None) -> str | None:
    """The credential's secret as ``req`` presents it: a browser session's cookie (the one the gate
    admitted it by), else the Bearer token or key (what the gate authenticated the caller by).
    A plugin's auth source signs callers in by what it alone understands (a proxy's header,
    a certificate, a token that changes), none of which is a lasting secret of the caller's:
    its answers are sealed with a key derived from the server's own key
    (``SLIPWAY_SECRET_KEY``, which no copy of the database holds) and the credential, and
    without a server key they are not kept at all (None)."""
    if isinstance(caller, SessionPrincipal):
        return getattr(req.context, "session_secret", None) or ""
    if isinstance(caller, SourcePrincipal):
        if server_key is None:
            return None
        return hmac.new(server_key, credential_of(caller).encode("utf-8"), hashlib.sha256).hexdigest()
    return bearer(req) or ""


class Seal:
    """Seals and opens a kept body with a key of the credential's secret; the credential
    and the idempotency key are its associated data (a body sealed for one record opens
    for no other)."""

    def __init__(self, secret: str, credential: str, key: str):
        derived = hmac.new(secret.encode("utf-8"), b"slipway idempotency-key answer", hashlib.sha256).digest()
        self._aead, self._bound = AESGCM(derived), f"{credential}\n{key}".encode("utf-8")

    def seal(self, body: bytes | None) -> bytes | None:
        if body is None:
            return None
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, body, self._bound)

    def open(self, sealed: bytes | None) -> bytes | None:
        return None if sealed is None else self._aead.decrypt(sealed[:12], sealed[12:], self._bound)


def checked_key(value: str, api: str) -> str:
    """The header's value if it is 1-255 printable ASCII characters; otherwise the API's
    error for a bad non-body parameter: 422 on the partner API, 400 on the panel's."""
    if not value:
        problem = "must not be empty"
    elif len(value) > MAX_LENGTH:
        problem = f"must be at most {MAX_LENGTH} characters"
    elif any(not " " <= ch <= "~" for ch in value):
        problem = "must be printable ASCII characters (0x20-0x7E)"
    else:
        return value
    raise ApiError(422 if api == "partner" else 400, "invalid parameters", fields={HEADER: problem})


def fingerprint(method: str, path: str, body) -> str:
    """SHA-256 of the method, the path and the canonical JSON of the parsed body."""
    canonical = "" if body is None else json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256("\n".join((method, path, canonical)).encode("utf-8")).hexdigest()


def _keeps(status: int) -> bool:
    return status != 429 and status < 500


class Idempotency:
    """Claims, replays and keeps answers for the pipeline (module docstring)."""

    def __init__(self, store, clock, server_key: bytes | None = None):
        self.store, self.clock, self.server_key = store, clock, server_key

    def _keys(self) -> PeeweeIdempotencyKeys:
        return PeeweeIdempotencyKeys(self.store.models)

    async def run(self, req, op, caller, body, handle):
        """The answer to a POST: ``handle()`` (the handler, awaited) runs unless the request
        carries a key this credential already used."""
        value = req.get_header(HEADER)
        credential = credential_of(caller)
        secret = presented_secret(req, caller, self.server_key)
        if value is None or credential is None or secret is None:
            return await handle()
        key = checked_key(value, op.api)
        request = {"method": op.method, "path": req.path, "fingerprint": fingerprint(op.method, req.path, body)}
        attempt = secrets.token_hex(16)
        record = await self.store.run(self._claim, credential, key, attempt, request)
        seal = Seal(secret, credential, key)
        if record is not None:
            return self._answer(record, request["fingerprint"], op.api, seal)
        try:
            reply = await handle()
        except Exception as ex:  # noqa: BLE001 (an error is an answer too: kept or released, then raised)
            err = to_api_error(ex)
            if _keeps(err.status):
                await self._finish(credential, key, attempt, err.status, falcon.MEDIA_JSON, err.headers,
                                   seal.seal(render_error(op.api, err)))
            else:
                await self._release(credential, key, attempt)
            raise err from (None if err is ex else ex)
        rendered = kept_reply(reply)
        if rendered is None or not _keeps(reply.status):
            await self._release(credential, key, attempt)
        else:
            await self._finish(credential, key, attempt, reply.status, rendered[0], reply.headers,
                               seal.seal(rendered[1]))
        return reply

    def _claim(self, credential: str, key: str, attempt: str, request: dict):
        """Claim the key for ``attempt`` (returns None) or return the record that holds it
        (blocking, one transaction)."""
        now = self.clock.now()
        keys = self._keys()
        with self.store.uow() as uow:
            record = None
            while record is None:  # the row the insert found may be gone before it is read (a
                # release or the clean-up committed in between, as PostgreSQL's read committed
                # allows): then the key is free and the next insert claims it
                keys.insert(credential, key, attempt=attempt, now=now, **request)
                record = keys.get(credential, key)
            if record.attempt != attempt:
                expired = record.created_at <= now - TTL
                stale = (record.state == "in_flight" and record.claimed_at <= now - STALE
                         and record.fingerprint == request["fingerprint"])
                if expired or stale:
                    if keys.take_over(credential, key, record.attempt, attempt=attempt, now=now, **request):
                        if stale:
                            log.warning("took over an idempotency key whose first request never answered")
                        record = None
                    else:  # another request took it over first: its claim is what holds it now
                        record = keys.get(credential, key) or replace(record, state="in_flight",
                                                                      fingerprint=request["fingerprint"])
            else:
                record = None
            uow.commit()
        return record

    @staticmethod
    def _answer(record, fingerprint_: str, api: str, seal: Seal):
        if record.fingerprint != fingerprint_:
            reused = "was already used for another request (method, path or body)"
            if api == "partner":
                raise ApiError(422, "invalid parameters", fields={HEADER: reused})
            raise ApiError(409, f"this {HEADER} {reused}")
        if record.state != "done":
            raise ApiError(409, f"the first request with this {HEADER} is still running; retry shortly",
                           headers={"Retry-After": "1"})
        return Reply(status=record.status, body=seal.open(record.body), content_type=record.content_type,
                     headers={**record.headers, REPLAYED: "true"})

    async def _finish(self, credential, key, attempt, status, content_type, headers, body) -> None:
        def finish():
            with self.store.uow() as uow:
                self._keys().finish(credential, key, attempt, status=status, content_type=content_type,
                                    headers=dict(headers), body=body)
                uow.commit()

        try:
            await self.store.run(finish)
        except Exception:  # the answer stands; the claim goes stale and a repeat runs again
            log.exception("could not keep the answer of an idempotent request")

    async def _release(self, credential, key, attempt) -> None:
        def release():
            with self.store.uow() as uow:
                self._keys().release(credential, key, attempt)
                uow.commit()

        try:
            await self.store.run(release)
        except Exception:  # the claim goes stale
            log.exception("could not release the claim of an idempotent request")

    def purge(self) -> int:
        """Delete the keys older than ``TTL`` (blocking); how many went."""
        with self.store.uow() as uow:
            gone = self._keys().purge(self.clock.now() - TTL)
            uow.commit()
        return gone
