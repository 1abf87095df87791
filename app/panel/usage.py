"""Service resources for the panel's answers: CPU and memory in use (engine stats), the
configured limits, and the storage the service's volumes hold.

Stats are the costly part (an engine round trip per container, and a second sample on
Docker's API), so a sample is kept for ``ttl`` seconds and shared by every request in that
window; a list page asks the engine once which containers run (``running_by_service``)
instead of once per service, and that answer too is kept for ``ttl`` seconds, so list
pages within that window are answered without an engine call (``cached_page``, on the
event loop). Resources are informative: an engine hiccup gives zeros, never a failed
read; a container started or stopped shows in the list within ``ttl`` seconds (a
service's detail asks the engine every time)."""
from __future__ import annotations

import threading
import time


class Resources:
    def __init__(self, runtime, ttl: float = 5.0):
        self.runtime, self.ttl = runtime, ttl
        self._samples: dict = {}  # container id -> (taken at, Usage)
        self._running = None  # (taken at, {service id: [running container ids]}) or None
        self._lock = threading.Lock()
        self._asking = threading.Lock()  # one engine call for the running containers at a time

    def _usage(self, container_id: str):
        now = time.monotonic()
        with self._lock:
            cached = self._samples.get(container_id)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        usage = self.runtime.usage(container_id)
        with self._lock:
            if len(self._samples) > 10_000:  # containers come and go: drop the stale ones
                self._samples = {k: v for k, v in self._samples.items() if now - v[0] < self.ttl}
            self._samples[container_id] = (time.monotonic(), usage)
        return usage

    def _sum(self, container_ids) -> dict:
        return _total([self._usage(container_id) for container_id in container_ids])

    def unknown(self, detail: bool = False) -> dict:
        """What is shown when the engine cannot be asked: zeros."""
        out = self._sum(())
        if detail:
            out.update({"cpu_limit": 0.0, "storage_mb": 0.0})
        return out

    def cached_page(self, service_ids) -> dict | None:
        """``{service id: resources}`` for a list page from what was sampled within ``ttl``
        seconds, or ``None`` when the engine must be asked (``for_page``). Never calls the
        engine: meant for the event loop."""
        now = time.monotonic()
        usages: dict = {}
        with self._lock:
            running = self._running
            if running is None or now - running[0] >= self.ttl:
                return None
            taken, by_service, complete = running
            for sid in service_ids:
                if not complete and sid not in by_service:
                    return None
                usages[sid] = []
                for container_id in by_service.get(sid, ()):
                    sample = self._samples.get(container_id)
                    if sample is None or now - sample[0] >= self.ttl:
                        return None
                    usages[sid].append(sample[1])
        return {sid: _total(found) for sid, found in usages.items()}

    def _running_by_service(self, service_ids) -> dict:
        with self._asking:  # the requests that missed together share one engine call
            with self._lock:
                running = self._running
            if running is not None and time.monotonic() - running[0] < self.ttl \
                    and (running[2] or all(sid in running[1] for sid in service_ids)):
                return running[1]
            everything = self.runtime.running_by_service()
            if everything is None:  # this runtime answers per service
                found = {sid: [c.id for c in self.runtime.containers(sid) if c.running] for sid in service_ids}
                complete = False
            else:
                found, complete = everything, True
            with self._lock:
                self._running = (time.monotonic(), found, complete)
            return found

    def for_page(self, service_ids) -> dict:
        """``{service id: resources}`` for a list page (blocking: engine calls). An engine
        that cannot answer (none configured, or down) shows zeros, and that answer is kept
        for ``ttl`` seconds like any other: the pages of those seconds answer from
        ``cached_page`` on the event loop instead of each sending a worker thread to fail."""
        try:
            running = self._running_by_service(service_ids)
            return {sid: self._sum(running.get(sid, ())) for sid in service_ids}
        except Exception:  # noqa: BLE001 - an engine that does not answer: the usage reads as none, for a while
            with self._lock:
                self._running = (time.monotonic(), {}, True)
            return {sid: self._sum(()) for sid in service_ids}

    def for_detail(self, service_id: str) -> dict:
        """With the limits: ``cpu_limit`` in percent of one core (100 = one core, summed
        over the containers; 0 when any container has no CPU limit) and ``storage_mb``
        (the service's volumes)."""
        out = self.unknown(detail=True)
        try:
            states = self.runtime.containers(service_id)
            out.update(self._sum([s.id for s in states if s.running]))
            limits = [s.cpu_limit for s in states]
            out["cpu_limit"] = round(sum(limits), 2) if limits and all(limits) else 0.0
            out["storage_mb"] = round(self.runtime.storage_bytes(service_id) / 1024 ** 2, 2)
        except Exception:  # noqa: BLE001 - an engine that does not answer: the limits and storage read as none
            pass
        return out


def _total(usages) -> dict:
    if not usages:  # a stopped service (most of a list page, often)
        return {"cpu_usage": 0.0, "memory_usage_mb": 0.0, "memory_limit_mb": 0.0}
    cpu = mem = limit = 0.0
    for usage in usages:
        cpu += usage.cpu_percent
        mem += usage.memory_mb
        limit = max(limit, usage.memory_limit_mb)
    return {"cpu_usage": round(cpu, 2), "memory_usage_mb": round(mem, 1), "memory_limit_mb": round(limit, 1)}
