"""Rate store ``redis://`` / ``rediss://`` (``SLIPWAY_RATE_STORE=redis://host:6379/0``):
every token bucket lives in Redis, so every Slipway process behind a load balancer spends
one bucket per key.

Each bucket is a hash ``slipway:rate:<table>:<key>`` of ``tokens`` and ``stamp``, updated by
one Lua script (atomic in Redis: no two processes ever spend the same token). The script
reads Redis's own clock (``TIME``), so processes on hosts whose clocks differ agree; the
hash expires once it would be full again, so idle keys cost nothing.

Each take has 0.5 s in all (``asyncio.timeout``: waiting for one of the pool's 64
connections, connecting, the script's reply); a request waits for a free connection
rather than failing when many are in flight. When Redis does not answer in time or
fails, the request is decided by a bucket of this process instead (the limit then holds
per process, as with ``memory``), and for the next second so are the others; then one
request tries Redis again while the rest stay local until it has answered. A warning is
logged at most once a minute, and start-up logs an error when Redis does not answer a
``PING`` (a wrong host or password). A rate store that is down never refuses nor fails a
request. Needs Redis 5 or newer (the script reads ``TIME`` before writing)."""
from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlsplit

import redis.asyncio as redis
from redis.exceptions import RedisError

from core.ratelimit import BucketTable, decide
from ports import hookimpl
from ports.ratestore import RateStore, RateStoreFactory, RateTable

log = logging.getLogger("slipway.ratestore")

PREFIX = "slipway:rate:"
TIMEOUT = 0.5  # seconds a take may spend on Redis, all in (a free connection, connect, reply)
CONNECTIONS = 64  # per process; more takes in flight wait for one
RETRY_AFTER = 1.0  # seconds a failed Redis is left alone
WARN_EVERY = 60.0

# KEYS[1]: the bucket; ARGV: rate (tokens/s), burst. Returns {allowed (0/1), tokens left}.
# Floats leave Lua as strings (a Lua number would be cut to an integer reply).
TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(held[1])
local stamp = tonumber(held[2])
if tokens == nil or stamp == nil then
  tokens = burst
  stamp = now
end
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'stamp', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {allowed, string.format('%.17g', tokens)}
"""


class RedisTable(RateTable):
    def __init__(self, store: "RedisRateStore", name: str, rate: float, burst: float):
        self.store, self.name, self.rate, self.burst = store, name, rate, burst
        self.local = BucketTable(rate, burst)  # while Redis cannot be reached

    async def take(self, key, now, *, rate=None, burst=None):
        rate, burst = rate or self.rate, burst or self.burst
        if self.store.admit():
            try:
                async with asyncio.timeout(self.store.timeout):
                    allowed, tokens = await self.store.script(keys=[f"{PREFIX}{self.name}:{key}"],
                                                              args=[rate, burst])
                decision = decide(bool(int(allowed)), float(tokens), rate, burst)
            except (RedisError, OSError, TimeoutError, ValueError, TypeError) as exc:
                self.store.failed(exc)
            else:
                self.store.answered()
                return decision
        return self.local.take(key, now, rate=rate, burst=burst)


class RedisRateStore(RateStore):
    def __init__(self, url: str, timeout: float = TIMEOUT):
        self.url, self.timeout = url, timeout  # seconds a take may spend on Redis, all in
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=CONNECTIONS, timeout=timeout,
                                                     socket_timeout=timeout, socket_connect_timeout=timeout,
                                                     health_check_interval=30)
        self.client = redis.Redis(connection_pool=pool)
        self.script = self.client.register_script(TAKE)
        self._down_until = 0.0  # monotonic time before which Redis is left alone
        self._probing = False  # one take is trying Redis again after it failed
        self._warned = 0.0

    def table(self, name, rate, burst):
        return RedisTable(self, name, rate, burst)

    def admit(self) -> bool:
        """Whether this take may ask Redis: always while it answers; after a failure, none
        for a second, then one at a time until one gets an answer."""
        if not self._down_until:
            return True
        if self._probing or time.monotonic() < self._down_until:
            return False
        self._probing = True
        return True

    def answered(self) -> None:
        self._down_until, self._probing = 0.0, False

    def failed(self, exc) -> None:
        now = time.monotonic()
        self._down_until, self._probing = now + RETRY_AFTER, False
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            log.warning("rate store unreachable (%s): limits hold per process until it answers",
                        type(exc).__name__)

    async def start(self):
        try:
            async with asyncio.timeout(2 * self.timeout):
                await self.client.ping()
        except (RedisError, OSError, TimeoutError) as exc:
            log.error("SLIPWAY_RATE_STORE: Redis does not answer (%s: %s); rate limits hold per process "
                      "until it does", type(exc).__name__, exc)

    async def stop(self):
        await self.client.aclose()


class RedisFactory(RateStoreFactory):
    """Serves ``redis://`` (and, as ``RedisFactory("rediss")``, ``rediss://``) URLs."""

    def __init__(self, name: str = "redis"):
        self.name = name

    def create(self, settings):
        url = settings.get("SLIPWAY_RATE_STORE") or ""
        try:
            parts = urlsplit(url)
        except ValueError:
            raise ValueError("a redis:// URL is redis://[user:password@]host[:port][/database number]") from None
        if not parts.hostname:
            raise ValueError("a redis:// URL names a host (redis://host:6379/0)")
        try:
            parts.port  # noqa: B018 (raises on a bad port)
            database = parts.path.strip("/")
            if database and not database.isdigit():
                raise ValueError
        except ValueError:
            raise ValueError("a redis:// URL is redis://[user:password@]host[:port][/database number]") from None
        return RedisRateStore(url)


@hookimpl
def register_rate_stores():
    return [RedisFactory("redis"), RedisFactory("rediss")]
