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

import logging
from urllib.parse import urlsplit

from ports import hookimpl
from ports.ratestore import RateStoreFactory

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
        from plugins.ratestore_redis.store import RedisRateStore  # redis-py: only where Redis is configured

        return RedisRateStore(url)


@hookimpl
def register_rate_stores():
    return [RedisFactory("redis"), RedisFactory("rediss")]


def __getattr__(name: str):
    """``RedisRateStore`` and ``RedisTable`` (of :mod:`plugins.ratestore_redis.store`),
    imported on first use."""
    if name in ("RedisRateStore", "RedisTable"):
        from plugins.ratestore_redis import store

        return getattr(store, name)
    raise AttributeError(name)
