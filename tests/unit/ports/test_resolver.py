"""The resolver port (ports.resolver): every distinct name looked up once, all at the
same time, within one overall deadline, however slowly the resolver answers; and core's
registry rule over it. A resolver of the test's own stands in for DNS: no lookup leaves
the process."""
from __future__ import annotations

import threading

from core.panel import containerfiles
from ports.resolver import Resolver, SystemResolver
from tests.support.fakes import FakeResolver


class Stalled(Resolver):
    """A resolver that never answers (until the test lets it go)."""

    def __init__(self):
        self.gate, self.asked, self.lock = threading.Event(), [], threading.Lock()

    def resolve(self, host, timeout=0.0):
        with self.lock:
            self.asked.append(host)
        self.gate.wait()
        return None


class Answering(Resolver):
    def __init__(self, answers):
        self.answers, self.seen = answers, []

    def resolve(self, host, timeout=0.0):
        self.seen.append(host)
        return self.answers.get(host)


def test_registry_hosts_are_looked_up_once_each_at_the_same_time_within_one_deadline():
    """A compose of 100 components naming hosts whose DNS never answers waits one
    deadline, not 100 of them; each host is looked up once; unanswered names are
    accepted at create and refused when the engine is about to pull."""
    stalled = Stalled()
    asked = stalled.asked
    images = [(f"services.s{i}.image", f"r{i % 50}.stalled.example/app:{i}") for i in range(100)]
    try:
        assert containerfiles.registries_refusal(images, strict=False, deadline=0.3, resolver=stalled) is None
        assert len(asked) == len(set(asked)) <= 8  # each once, eight at a time, none started after the deadline
        reason = containerfiles.registries_refusal(images, strict=True, deadline=0.3, resolver=stalled)
        assert reason.startswith("services.s0.image: the registry host r0.stalled.example of ") \
            and "does not resolve" in reason, reason
    finally:
        stalled.gate.set()


def test_resolve_all_answers_each_distinct_name_once():
    lookup = Answering({"a.example": ["93.184.216.34"], "b.example": ["10.0.0.1"]})
    seen = lookup.seen
    found = lookup.resolve_all(["a.example", "b.example", "a.example", "c.example"], deadline=30)
    assert found == {"a.example": ["93.184.216.34"], "b.example": ["10.0.0.1"], "c.example": None}
    assert sorted(seen) == ["a.example", "b.example", "c.example"]
    assert lookup.resolve_all([], deadline=1) == {}


def test_a_lookup_that_raises_does_not_resolve():
    class Broken(Resolver):
        def resolve(self, host, timeout=0.0):
            raise OSError("no name server")

    assert Broken().resolve_all(["a.example"], deadline=5) == {"a.example": None}


def test_the_fake_and_the_system_resolver_are_resolvers():
    """Both stand where core asks for a resolver; the fake answers at once, a name it
    was not told of does not resolve, an address written out answers itself."""
    assert isinstance(SystemResolver(), Resolver) and isinstance(FakeResolver(), Resolver)
    fake = FakeResolver({"a.example": ["93.184.216.34"]})
    assert fake.resolve("a.example") == ["93.184.216.34"] and fake.resolve("b.example") is None
    assert fake.resolve("[::1]") == ["::1"] and fake.asked == ["a.example", "b.example"]
    assert fake.resolve_all(["a.example", "a.example", "c.example"]) == {"a.example": ["93.184.216.34"],
                                                                         "c.example": None}
