"""The Redis rate store (plugins/ratestore_redis) against a real Redis: one bucket per
key whoever asks, atomically; per-key limits; Redis's clock; a Redis that cannot be
reached degrades to this process's buckets (never a refusal, never an error); bad
``SLIPWAY_RATE_STORE`` values stop start-up naming the variable."""
from __future__ import annotations

import asyncio
import logging
import secrets
import time

import pytest

from app.config import Config, ConfigError
from dataclasses import replace

from app.composition import Composition
from app.http.ratestore import MemoryRateStore
from plugins.ratestore_redis import PREFIX, TIMEOUT, RedisFactory, RedisRateStore
from tests.support.processes import free_port

# The atomicity tests give each take this long on Redis instead of the store's 0.5 s: they
# are about one bucket shared, and on a machine busy with other tests (pytest-xdist) a take
# among hundreds in flight can wait longer than 0.5 s for a connection, then rightly decide
# locally. The timeout itself has its own tests below, with a Redis that never answers.
PATIENT = 10.0


def _table(url, rate=1.0, burst=30, timeout=TIMEOUT):
    store = RedisRateStore(url, timeout=timeout)
    return store, store.table("test-" + secrets.token_hex(4), rate, burst)


def test_two_stores_spend_one_bucket_atomically(redis_url):
    """Two stores (two processes' connections) taking 80 tokens at once from a burst of
    30 with a slow refill: exactly 30 allowed, whichever store asked."""
    async def run():
        one, table = _table(redis_url, rate=0.001, timeout=PATIENT)
        two = RedisRateStore(redis_url, timeout=PATIENT)
        other = two.table(table.name, table.rate, table.burst)
        key = "tok_" + secrets.token_hex(4)
        try:
            decisions = await asyncio.gather(*[(table if i % 2 else other).take(key, 0.0) for i in range(80)])
            assert sum(d.allowed for d in decisions) == 30
            refused = [d for d in decisions if not d.allowed]
            assert all(d.retry_after >= 1 and d.remaining == 0 and d.limit == 30 for d in refused)
            assert sorted(d.remaining for d in decisions if d.allowed) == list(range(30))
            # another key has a bucket of its own
            assert (await other.take(key + "x", 0.0)).allowed
            ttl = await one.client.pttl(f"{PREFIX}{table.name}:{key}")
            assert 0 < ttl <= (30 / 0.001 + 1) * 1000  # the hash goes once it would be full
        finally:
            await one.stop()
            await two.stop()

    asyncio.run(run())


def test_per_key_limits_refill_on_redis_clock(redis_url):
    """``rate``/``burst`` of the key (a panel key's rpm) apply; tokens come back with time
    on Redis's clock, whatever ``now`` the caller passes."""
    async def run():
        store, table = _table(redis_url, rate=1.0, burst=30)
        key = "key_" + secrets.token_hex(4)
        try:
            first = [await table.take(key, 1e9, rate=20.0, burst=2) for _ in range(3)]
            assert [d.allowed for d in first] == [True, True, False] and first[0].limit == 2
            await asyncio.sleep(0.2)  # 20 tokens a second: ~4 back, capped at 2
            assert (await table.take(key, 0.0, rate=20.0, burst=2)).allowed
        finally:
            await store.stop()

    asyncio.run(run())


def test_more_takes_at_once_than_connections_still_share_one_bucket(redis_url, caplog):
    """400 takes in flight on one store (more than its 64 connections): they wait for a
    connection instead of failing over to local buckets; exactly the burst is allowed and
    nothing is logged as unreachable."""
    async def run():
        store, table = _table(redis_url, rate=0.001, burst=30, timeout=PATIENT)
        try:
            decisions = await asyncio.gather(*[table.take("tok_" + table.name, 0.0) for _ in range(400)])
            assert sum(d.allowed for d in decisions) == 30
        finally:
            await store.stop()

    with caplog.at_level(logging.WARNING, logger="slipway.ratestore"):
        asyncio.run(run())
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]


def test_a_redis_that_never_answers_costs_a_take_at_most_its_timeout(caplog):
    """A listener that accepts and never replies (a hung Redis): the first takes give up
    after the store's timeout and decide locally; for the next second the others do not
    wait at all; one take then tries Redis again. Start-up logs an error naming the
    setting."""
    from plugins.ratestore_redis import RETRY_AFTER, TIMEOUT

    async def run():
        held = []

        async def silent(reader, writer):
            held.append(writer)  # read nothing, answer nothing
            await asyncio.sleep(3600)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store, table = _table(f"redis://127.0.0.1:{port}/0", rate=0.001, burst=3)
        try:
            await store.start()
            started = time.monotonic()
            first = await asyncio.gather(*[table.take("tok_h", 0.0) for _ in range(20)])
            waited = time.monotonic() - started
            assert sum(d.allowed for d in first) == 3  # the local bucket decided
            assert waited < TIMEOUT * 4, waited  # no take waited for more than the timeout
            started = time.monotonic()
            again = await asyncio.gather(*[table.take("tok_h", 0.0) for _ in range(20)])
            assert not any(d.allowed for d in again) and time.monotonic() - started < TIMEOUT / 2
            await asyncio.sleep(RETRY_AFTER)
            assert store.admit() and not store.admit()  # one probe at a time
        finally:
            await store.stop()
            for writer in held:
                writer.close()
            server.close()

    with caplog.at_level(logging.WARNING, logger="slipway.ratestore"):
        asyncio.run(run())
    messages = [r.getMessage() for r in caplog.records]
    assert any("SLIPWAY_RATE_STORE" in m and "does not answer" in m for m in messages)


def test_an_unreachable_redis_degrades_to_buckets_of_this_process(caplog):
    """Nothing listens: every take answers at once from a local bucket (the limit still
    holds, per process), one warning is logged, no exception reaches the request."""
    async def run():
        store, table = _table(f"redis://127.0.0.1:{free_port()}/0", rate=0.001, burst=3)
        try:
            decisions = [await table.take("tok_a", 0.0) for _ in range(5)]
            assert [d.allowed for d in decisions] == [True, True, True, False, False]
        finally:
            await store.stop()

    with caplog.at_level(logging.WARNING, logger="slipway.ratestore"):
        asyncio.run(run())
    assert len([r for r in caplog.records if "rate store unreachable" in r.getMessage()]) == 1


@pytest.mark.parametrize("value, words", [
    ("memcached://127.0.0.1:11211", "no loaded plugin provides 'memcached' (loaded: memory, redis, rediss)"),
    ("redis://", "names a host"),
    ("redis://127.0.0.1:6379/zero", "database number"),
    ("redis://127.0.0.1:port/0", "database number"),
    ("nonsense", "scheme ''"),
    ("redis://[::1", "redis://[user:password@]host"),
])
def test_a_bad_rate_store_stops_start_up_naming_the_variable(value, words):
    config = Config(database_url="sqlite:///:memory:", rate_store=value)
    with pytest.raises(ConfigError, match="SLIPWAY_RATE_STORE") as raised:
        _rates(None, config)
    assert words in str(raised.value)


def test_memory_is_the_default():
    assert Config.from_env({}).rate_store == "memory"
    assert isinstance(_rates(None, Config.from_env({"SLIPWAY_RATE_STORE": "Memory"})),
                      MemoryRateStore)
    assert isinstance(_rates(None, Config.from_env({})), MemoryRateStore)


def test_a_plugin_adds_a_rate_store_through_register_rate_stores():
    """A plugin's factory serves its URL scheme; two plugins serving one scheme stop
    start-up."""
    from app.pluginmanager import PluginError
    from ports import hookimpl
    from ports.ratestore import RateStoreFactory

    class Factory(RateStoreFactory):
        name = "memcached"

        def create(self, settings):
            assert settings["SLIPWAY_RATE_STORE"] == "memcached://127.0.0.1:11211"
            return MemoryRateStore()

    class Plugin:
        @hookimpl
        def register_rate_stores(self):
            return [Factory()]

    class Clash:
        @hookimpl
        def register_rate_stores(self):
            return [RedisFactory()]

    config = Config(database_url="sqlite:///:memory:", rate_store="memcached://127.0.0.1:11211")
    assert isinstance(_rates(Plugin(), config), MemoryRateStore)
    with pytest.raises(PluginError, match="'redis'"):
        _rates(Clash(), Config(database_url="sqlite:///:memory:",
                                                               rate_store="redis://127.0.0.1:6379/0"))


def _rates(plugin, config):
    """The rate store the composition of ``config`` builds (with ``plugin`` registered)."""
    return Composition(replace(config, plugins=(plugin,) if plugin is not None else ())).rates
