"""Worker leases: which processes are running jobs right now.

Every process that runs deploy, backup and restore jobs holds a lease, a row it touches
every ``HEARTBEAT_S`` seconds, and marks the jobs it claims with its worker id. A job
found ``running`` whose owner's lease is older than ``STALE_S`` (or gone: a clean
shutdown drops it) was left by a process that stopped; only such jobs are taken back.
So several processes sharing one PostgreSQL database never take each other's live jobs,
and a restarted process picks up its predecessor's at once after a clean stop, or within
``STALE_S`` after a crash.
"""
from __future__ import annotations

import secrets
from datetime import timedelta

HEARTBEAT_S = 10.0
STALE_S = 60.0


def new_worker_id() -> str:
    return f"wkr_{secrets.token_hex(8)}"


def beat(uow, clock, worker_id: str) -> None:
    with uow:
        uow.leases.beat(worker_id, clock.now())
        uow.leases.purge(clock.now() - timedelta(days=1))
        uow.commit()


def retire(uow, worker_id: str) -> None:
    """A clean stop: its jobs (none should be running) are anyone's at once."""
    with uow:
        uow.leases.drop(worker_id)
        uow.commit()


def stale_before(clock):
    return clock.now() - timedelta(seconds=STALE_S)
