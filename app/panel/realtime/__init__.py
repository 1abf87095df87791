"""The panel's real-time WebSockets: the channel ``GET /api/ws`` and log following
``GET /api/services/{id}/logs?follow=true``.

- ``Hub`` holds this process's channel connections. It subscribes once to the event bus
  and hands each event, serialized once, to the connections that may see it: a
  ``customer`` key only its own customer's services, a key without ``services:logs`` no
  ``service.logs``, a connection that sent ``subscribe`` only the services it named.
- Every connection has a bounded queue (``SLIPWAY_WS_QUEUE``, 1000 messages). A client
  that lets it fill up is disconnected (close code 1008 and a reason) instead of making
  the server hold an ever-growing backlog.
- ``service.logs``: a log pump per service, in the process whose clients want it. It is
  started when the first connection allowed to see the service's logs wants them (it
  subscribed to the service by name, or it is unnarrowed: then every running service its
  key may see is followed) and stopped when the last such connection leaves or narrows
  its subscription away; its lines go to this process's connections only (never through the shared bus:
  each process reads the engine itself, so lines are neither duplicated nor pushed
  through PostgreSQL).
- Credentials: a key or session holds at most ``SLIPWAY_WS_PER_KEY`` (20) open
  WebSockets in this process (channel and log follows together; another upgrade is 429
  ``rate_limited``). Every ``RECHECK_S`` seconds, while any is open, one read of the
  database checks the keys and sessions of all of this process's sockets (so a revoke or
  logout in any process sharing the database counts); the sockets of a key that was
  revoked or expired, or of a session that ended or whose user changed, are closed with
  1008 and the reason.
- A connection's ``subscribe`` messages beyond ``SUBSCRIBES_PER_S`` (5) in any second are
  answered with an ``error`` and ignored (the subscription stays as it was).
- ``ServiceFollower`` follows every container of a service: a thread per container
  reads ``runtime.follow_logs``; every couple of seconds the container list is read
  again, so restarted and redeployed containers are followed too. Stopping it closes the
  engine streams, which ends the threads.

One module per concern: ``sockets`` (a socket's outbox and send/receive loop),
``subscriptions`` (what a connection may see and asked for), ``logs`` (the log pumps),
``hub`` (the connections, the bus subscription, the per-key count and re-check),
``handlers`` (the WebSocket handlers) and ``progress`` (deploy progress on the bus).
"""
from __future__ import annotations

from app.panel.realtime.handlers import RealtimeHandlers
from app.panel.realtime.hub import Hub
from app.panel.realtime.progress import DeployProgress

__all__ = ["DeployProgress", "Hub", "RealtimeHandlers"]
