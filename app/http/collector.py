"""Python's cyclic garbage collector, held where it costs requests and jobs more than it
frees: the process's own long-lived objects are frozen out of its sight once the app has
started (``freeze_startup_objects``), and a billing pricing runs with it paused
(``collector_paused``). Part of the read path's documented speed-ups
(``app.storage.readpath``, docs/decisions.md "Read path"); the use cases in ``core`` know
nothing of it."""
from __future__ import annotations

import contextlib
import gc
import threading

_frozen = False


def freeze_startup_objects() -> None:
    """Once per process, when the first app has started: collect, then move every object
    alive (modules, the contract, routes, plugins: they live as long as the process) out
    of the garbage collector's sight (``gc.freeze``), so its collections scan only what
    requests make, not the whole start-up heap."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


_pauses_lock = threading.Lock()
_pauses = 0  # pricings running now
_collector_was_on = False


@contextlib.contextmanager
def collector_paused():
    """The collector held off while a pricing runs (``core.partner.statements.recompute``
    and ``correct``; usable as a decorator). Reading a large partner's histories makes
    hundreds of thousands of small tuples and lists (none in a cycle), and every full
    collection on the way walks all of them again: for 100,000 licenses that was about a
    third of the recompute. Pricings running at once share one pause; the collector is
    back, if it was on, when the last one ends."""
    global _pauses, _collector_was_on
    with _pauses_lock:
        if _pauses == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses -= 1
            if _pauses == 0 and _collector_was_on:
                gc.enable()
