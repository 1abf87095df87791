"""The services list's resources (``app.panel.usage.Resources``) on a real engine: one
engine call answers a page, and pages within ``ttl`` seconds are answered from it on the
event loop (``cached_page``) with no engine call, also when the engine could not answer;
``ttl`` 0 always asks."""
from __future__ import annotations

from app.panel.usage import Resources
from tests.integration.test_runtime_conformance import service  # noqa: F401 (fixture)
from tests.support.engine import _factories, engine_settings, wait_for


class Counting:
    """The real runtime, counting the calls that reach it."""

    def __init__(self, runtime):
        self.runtime, self.calls = runtime, []

    def __getattr__(self, name):
        found = getattr(self.runtime, name)
        if not callable(found):
            return found

        def counted(*args, **kwargs):
            self.calls.append(name)
            return found(*args, **kwargs)
        return counted


def test_a_page_asks_the_engine_once_and_the_next_pages_not_at_all(runtime, service):
    service.run("web", "sleep", "600")
    wait_for(lambda: Resources(runtime, ttl=0).for_page([service.id])[service.id]["memory_usage_mb"] > 0,
             "the container to run")  # a swarm starts its task after the call
    engine = Counting(runtime)
    resources = Resources(engine, ttl=3600)
    assert resources.cached_page([service.id]) is None  # nothing sampled yet
    first = resources.for_page([service.id, "svc_not_running"])
    assert first[service.id]["memory_usage_mb"] > 0 and first[service.id]["memory_limit_mb"] > 0
    assert first["svc_not_running"] == {"cpu_usage": 0.0, "memory_usage_mb": 0.0, "memory_limit_mb": 0.0}
    asked = len(engine.calls)
    assert asked >= 1
    again = resources.cached_page([service.id, "svc_not_running"])
    assert again == first and len(engine.calls) == asked  # answered from what was sampled


def test_with_no_time_to_keep_every_page_asks_the_engine(runtime, service):
    service.run("web", "sleep", "600")
    engine = Counting(runtime)
    resources = Resources(engine, ttl=0)
    resources.for_page([service.id])
    asked = len(engine.calls)
    assert resources.cached_page([service.id]) is None
    resources.for_page([service.id])
    assert len(engine.calls) > asked


def test_an_engine_that_does_not_answer_gives_zeros_kept_for_ttl_like_any_answer():
    zeros = {"cpu_usage": 0.0, "memory_usage_mb": 0.0, "memory_limit_mb": 0.0}
    dead = Counting(_factories()["podman"].create(engine_settings("unix:///nonexistent/slipway.sock")))
    resources = Resources(dead, ttl=3600)
    assert resources.for_page(["svc_a"]) == {"svc_a": zeros}
    asked = len(dead.calls)
    assert asked >= 1
    # the next pages answer on the event loop, without sending a thread to fail again
    assert resources.cached_page(["svc_a", "svc_b"]) == {"svc_a": zeros, "svc_b": zeros}
    assert len(dead.calls) == asked
    # with no time to keep, every page asks again
    fresh = Resources(dead, ttl=0)
    assert fresh.for_page(["svc_a"]) == {"svc_a": zeros}
    assert fresh.cached_page(["svc_a"]) is None
    fresh.for_page(["svc_a"])
    assert len(dead.calls) > asked + 1
