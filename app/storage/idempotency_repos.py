"""peewee repository of idempotency keys (``app/http/idempotency.py``; the app uses it,
core does not, so it is not part of ``ports.storage``).

A claim is an ``INSERT`` the unique index on ``(credential, idempotency_key)`` decides:
on SQLite and PostgreSQL alike, and across every process sharing the database, exactly
one request inserts the row; the others find it. A row that may be taken over (expired,
or a claim gone stale) changes hands with an ``UPDATE`` conditioned on the ``attempt``
that held it, so of two requests taking it over at once one wins.
"""
from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Record:
    fingerprint: str
    attempt: str
    state: str  # in_flight, done
    status: int | None
    content_type: str | None
    headers: dict
    body: bytes | None
    created_at: object
    claimed_at: object


class PeeweeIdempotencyKeys:
    def __init__(self, m):
        self.m = m

    def _where(self, credential: str, key: str):
        K = self.m.IdempotencyKey
        return (K.credential == credential) & (K.idempotency_key == key)

    def insert(self, credential: str, key: str, *, method: str, path: str, fingerprint: str, attempt: str,
               now) -> None:
        """Insert an in-flight claim unless the key has a row already (then nothing)."""
        self.m.IdempotencyKey.insert(credential=credential, idempotency_key=key, method=method, path=path,
                                     fingerprint=fingerprint, attempt=attempt, state="in_flight",
                                     created_at=now, claimed_at=now).on_conflict_ignore().execute()

    def get(self, credential: str, key: str) -> Record | None:
        row = self.m.IdempotencyKey.get_or_none(self._where(credential, key))
        if row is None:
            return None
        return Record(fingerprint=row.fingerprint, attempt=row.attempt, state=row.state, status=row.status,
                      content_type=row.content_type, headers=json.loads(row.headers or "{}"),
                      body=bytes(row.body) if row.body is not None else None, created_at=row.created_at,
                      claimed_at=row.claimed_at)

    def take_over(self, credential: str, key: str, held_by: str, *, method: str, path: str, fingerprint: str,
                  attempt: str, now) -> bool:
        """Make the row a fresh in-flight claim of ``attempt``, if ``held_by`` still holds it."""
        K = self.m.IdempotencyKey
        return bool(K.update(method=method, path=path, fingerprint=fingerprint, attempt=attempt, state="in_flight",
                             status=None, content_type=None, headers=None, body=None, created_at=now,
                             claimed_at=now)
                    .where(self._where(credential, key) & (K.attempt == held_by)).execute())

    def finish(self, credential: str, key: str, attempt: str, *, status: int, content_type: str | None,
               headers: dict, body: bytes | None) -> bool:
        """Keep the answer of ``attempt`` (not if its claim was taken over meanwhile)."""
        K = self.m.IdempotencyKey
        return bool(K.update(state="done", status=status, content_type=content_type,
                             headers=json.dumps(headers, sort_keys=True), body=body)
                    .where(self._where(credential, key) & (K.attempt == attempt)).execute())

    def release(self, credential: str, key: str, attempt: str) -> None:
        """Drop the claim of ``attempt`` (its answer is not kept: a retry runs again)."""
        K = self.m.IdempotencyKey
        K.delete().where(self._where(credential, key) & (K.attempt == attempt)).execute()

    def purge(self, before) -> int:
        """Remove the keys first used before ``before``; how many went."""
        K = self.m.IdempotencyKey
        return K.delete().where(K.created_at < before).execute()
