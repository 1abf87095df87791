"""The engine's answer before work that needs it is stored (docs/decisions.md, "The first
hour, second round").

With no engine configured (``SLIPWAY_RUNTIME_URL`` unset or empty, and none found), or one
that does not answer its ping, a request that would queue work for the engine (create a
service, redeploy, start, restart, rollback, create a backup, restore) is refused at once:
503 ``engine_unavailable``, a message naming ``SLIPWAY_RUNTIME_URL`` and ``Retry-After``;
nothing is stored. The ping runs on the request engine-call threads (``app.engine_calls``,
the caller's share), before any transaction, never on a database thread (``core.waits``).

A ping's answer is kept a short while so a burst of requests pings once: an answer for
``OK_FOR`` seconds, a failure (or a ping past ``SLIPWAY_ENGINE_TIMEOUT``) for ``DOWN_FOR``
seconds, so an engine that comes back is used within a second.
"""
from __future__ import annotations

import time

from app.http.errors import ApiError
from core.redaction import redact_url
from ports.runtime import EngineError

#: seconds a ping that answered is trusted
OK_FOR = 5.0
#: seconds a ping that failed is remembered
DOWN_FOR = 1.0
#: the ``Retry-After`` of the refusal, seconds
RETRY_AFTER = 5

CODE = "engine_unavailable"


def not_configured_message() -> str:
    return ("no container engine is configured: set SLIPWAY_RUNTIME_URL to the engine's API socket "
            "(e.g. unix:///run/user/1000/podman/podman.sock); nothing was changed")


def not_answering_message(url: str) -> str:
    return (f"the container engine at {redact_url(url)} (SLIPWAY_RUNTIME_URL) does not answer its ping: "
            "start it or correct SLIPWAY_RUNTIME_URL; nothing was changed")


def refusal(message: str) -> ApiError:
    return ApiError(503, message, code=CODE, headers={"Retry-After": str(RETRY_AFTER)})


class EngineGate:
    """``await gate.require(run)`` returns when the engine answers, else raises the 503.
    ``url``: the configured engine's (None: none); ``runtime``: the runtime plugin;
    ``run(fn)``: runs ``fn`` on the engine-call threads (awaitable)."""

    def __init__(self, runtime, url: str | None, *, monotonic=time.monotonic):
        self.runtime, self.url, self.monotonic = runtime, url, monotonic
        self._until = 0.0
        self._answered = False

    def cached(self) -> bool | None:
        """The kept answer (True: it answered), None when there is none or it is too old."""
        return self._answered if self.monotonic() < self._until else None

    def remember(self, answered: bool) -> None:
        self._answered = answered
        self._until = self.monotonic() + (OK_FOR if answered else DOWN_FOR)

    def _ping(self) -> bool:
        try:
            return bool(self.runtime.ping())
        except Exception:  # noqa: BLE001 (any failure to answer is "does not answer")
            return False

    async def require(self, run) -> None:
        if not self.url:
            raise refusal(not_configured_message())
        answered = self.cached()
        if answered is None:
            try:
                answered = await run(self._ping)
            except EngineError:  # past the request deadline (SLIPWAY_ENGINE_TIMEOUT)
                answered = False
            self.remember(answered)
        if not answered:
            raise refusal(not_answering_message(self.url))


def ping_once(runtime, url: str | None, timeout: float) -> bool:
    """Whether the engine at ``url`` answers its ping within ``timeout`` seconds (on a
    daemon thread: ``slipway serve``'s warning at start, before any database thread)."""
    import threading

    if not url:
        return False
    answer: list = []

    def ping():
        try:
            answer.append(bool(runtime.ping()))
        except Exception:  # noqa: BLE001
            answer.append(False)

    thread = threading.Thread(target=ping, name="slipway-engine-ping", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answer and answer[0])
