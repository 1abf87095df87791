"""The in-process event bus, the NOTIFY payload encoding, and the channel's per-client
rules (bounded outbox, who sees what) without a server."""
from __future__ import annotations

import asyncio
import json
import threading

import pytest

from app.config import Config, ConfigError
from app.composition import Composition
from app.panel.event_bus import PAYLOAD_LIMIT, InProcessBus, decode, encode
from app.panel.realtime import Hub
from app.panel.realtime.sockets import SLOW_CLIENT, Outbox
from app.panel.realtime.subscriptions import Connection
from core.panel.access import ApiKey, Principal, permissions_of
from ports.events import Event


def _event(n=0, service="svc_a", customer="cust_a", kind="service.status"):
    return Event(kind, {"id": service, "status": f"s{n}"}, service, customer)


def test_publish_from_threads_runs_callbacks_on_the_subscribing_loop_in_order():
    bus = InProcessBus()

    async def main():
        loop_thread = threading.current_thread()
        got, threads = [], set()
        done = asyncio.Event()

        def callback(event):
            threads.add(threading.current_thread())
            got.append(event.data["status"])
            if len(got) == 200:
                done.set()

        bus.subscribe(callback)
        publisher = threading.Thread(target=lambda: [bus.publish(_event(n)) for n in range(200)])
        publisher.start()
        await asyncio.wait_for(done.wait(), 10)
        publisher.join()
        return got, threads, loop_thread

    got, threads, loop_thread = asyncio.run(main())
    assert got == [f"s{n}" for n in range(200)]
    assert threads == {loop_thread}


def test_unsubscribe_and_a_failing_subscriber():
    bus = InProcessBus()

    async def main():
        got = []
        bad = bus.subscribe(lambda e: 1 / 0)
        good = bus.subscribe(got.append)
        gone = bus.subscribe(lambda e: got.append("gone"))
        bus.unsubscribe(gone)
        bus.unsubscribe(gone)  # twice is fine
        bus.publish(_event())
        await asyncio.sleep(0.05)
        assert [e.data["status"] for e in got] == ["s0"]
        bus.unsubscribe(bad)
        bus.unsubscribe(good)
        assert bus.subscriber_count == 0
        bus.publish(_event(1))
        await asyncio.sleep(0.05)
        assert len(got) == 1

    asyncio.run(main())


def test_each_loop_gets_every_event():
    bus = InProcessBus()
    results, ready = {}, threading.Barrier(3)

    def run(name):
        async def main():
            got, done = [], asyncio.Event()
            bus.subscribe(lambda e: (got.append(e), len(got) == 3 and done.set()))
            await asyncio.to_thread(ready.wait)
            await asyncio.wait_for(done.wait(), 10)
            results[name] = [e.data["status"] for e in got]
        asyncio.run(main())

    loops = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in loops:
        t.start()
    ready.wait()
    for n in range(3):
        bus.publish(_event(n))
    for t in loops:
        t.join(10)
    assert results == {"a": ["s0", "s1", "s2"], "b": ["s0", "s1", "s2"]}


def test_notify_payload_cuts_long_log_messages_and_round_trips():
    line = Event("service.logs", {"service_id": "svc_a", "timestamp": "2026-01-01T00:00:00Z", "stream": "stdout",
                                  "message": "é" * 20000}, "svc_a", "cust_a")
    payload = encode(line)
    assert len(payload.encode("utf-8")) <= PAYLOAD_LIMIT
    back = decode(payload)
    assert back.data["message"].endswith("…") and back.data["message"].startswith("éé")
    assert (back.type, back.service_id, back.customer_id, back.timestamp) == (
        line.type, line.service_id, line.customer_id, line.timestamp)
    small = _event()
    assert decode(encode(small)) == small


def test_bus_configuration():
    assert isinstance(Composition(Config(database_url="sqlite:///x.db")).bus, InProcessBus)
    with pytest.raises(ConfigError, match="SLIPWAY_EVENT_BUS=postgres needs a PostgreSQL"):
        Config(database_url="sqlite:///x.db", event_bus="postgres")
    with pytest.raises(ConfigError, match=r"SLIPWAY_EVENT_BUS: no loaded plugin provides 'redis' \(loaded: memory, postgres\)"):
        Composition(Config.from_env({"SLIPWAY_EVENT_BUS": "redis"})).bus  # noqa: B018 - builds it: the setting is refused
    assert Config.from_env({}).event_bus == "memory" and Config.from_env({}).ws_queue == 1000


def test_outbox_is_bounded_and_asks_to_close_a_slow_client():
    async def main():
        box = Outbox(3)
        assert all(box.offer(f"m{n}") for n in range(3))
        assert not box.offer("m3") and box.overflowed and len(box) == 0
        assert await box.next() is None
        assert box.close_reason() == (SLOW_CLIENT, "client too slow: more than 3 messages waiting")
        calm = Outbox(3)
        calm.offer("x")
        assert await calm.next() == "x"
        calm.close(1001, "bye")
        assert await calm.next() is None and calm.close_reason() == (1001, "bye")

    asyncio.run(main())


def _principal(role, customer=None, deny=()):
    from datetime import datetime, timezone

    key = ApiKey(id="0" * 16, name="k", role=role, secret_hash="", rate_limit_rpm=10,
                 created_at=datetime.now(timezone.utc), customer_id=customer, denied_permissions=tuple(deny))
    return Principal(key=key, permissions=permissions_of(key))


def test_who_sees_what():
    async def main():
        customer = Connection(_principal("customer", "cust_a"), 10)
        viewer = Connection(_principal("viewer"), 10)
        blind = Connection(_principal("admin", deny=["services:logs"]), 10)
        assert customer.wants(_event()) and not customer.wants(_event(customer="cust_b"))
        assert not customer.wants(_event(customer=None))
        assert viewer.wants(_event(customer="cust_b"))
        logs = Event("service.logs", {"message": "x"}, "svc_a", "cust_a")
        assert viewer.wants(logs) and not blind.wants(logs)  # unnarrowed: every line the key may see
        viewer.services = {"svc_b"}
        assert not viewer.wants(logs)  # narrowed: lines of the services whose logs it follows
        viewer.log_services = {"svc_a"}
        blind.log_services = {"svc_a"}
        assert viewer.wants(logs) and not blind.wants(logs)
        assert not viewer.wants(_event()) and viewer.wants(_event(service="svc_b"))
        backup = Event("backup.progress", {"progress": 50}, "svc_b", "cust_a")
        admin = Connection(_principal("admin"), 10)
        assert admin.wants(backup) and not viewer.wants(backup)  # backups:read is admin's
        assert not Connection(_principal("admin", deny=["backups:read"]), 10).wants(backup)

        bus = InProcessBus()
        hub = Hub(None, bus, None, None, limit=10)
        hub.start()
        hub.add(customer)
        bus.publish(_event())
        bus.publish(_event(customer="cust_b"))
        await asyncio.sleep(0.05)
        assert [json.loads(await customer.outbox.next())["data"]["status"]] == ["s0"] and len(customer.outbox) == 0
        await hub.stop()
        assert await customer.outbox.next() is None and customer.outbox.close_reason()[0] == 1001

    asyncio.run(main())
