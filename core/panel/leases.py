"""Worker leases: which processes are running jobs right now.

Every process that runs deploy, backup and restore jobs holds a lease, a row it touches
every ``HEARTBEAT_S`` seconds, and marks the jobs it claims with its worker id. A job
found ``running`` whose owner's lease is older than ``STALE_S`` (or gone: a clean
shutdown drops it) was left by a process that stopped; only such jobs are taken back.
So several processes sharing one PostgreSQL database never take each other's live jobs,
and a restarted process picks up its predecessor's at once after a clean stop, or within
``STALE_S`` after a crash.

A start, stop or restart of a service, and a restore into it, holds a lease of its own,
``op_<service id>_<random>`` (one per operation, so two at once on one service each hold
theirs until they end), while it touches the containers: the health check leaves such a
service alone (containers being stopped and started again are not a verdict on it). A
lease counts for ``OPERATION_S`` after its last beat at most, so one left by a process that
died mid-way stops counting on its own; a long operation (a restore) beats it as it goes.
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


OPERATION_S = 900.0  # how long an operation's lease counts at most


OPERATION_PREFIX = "op_"


def operation_key(service_id: str) -> str:
    """A new operation's lease on ``service_id``: ``op_<service id>_<random>``."""
    return f"{OPERATION_PREFIX}{service_id}_{secrets.token_hex(4)}"


def hold_operation(uow, clock, key: str) -> None:
    """In the caller's transaction: the operation of lease ``key`` (``operation_key``)
    begins, or goes on (its lease is beaten again)."""
    uow.leases.beat(key, clock.now())


def end_operation(uow, key: str) -> None:
    """In the caller's transaction: the operation of lease ``key`` ended."""
    uow.leases.drop(key)


def operating(uow, clock, service_ids) -> set:
    """Which of ``service_ids`` have an operation under way (in the caller's transaction)."""
    since = clock.now() - timedelta(seconds=OPERATION_S)
    held = {key[len(OPERATION_PREFIX):].rpartition("_")[0] for key in uow.leases.held(OPERATION_PREFIX, since)}
    return held & set(service_ids)
