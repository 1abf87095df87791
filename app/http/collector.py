"""Python's cyclic garbage collector, held where it costs a job more than it frees: a
billing pricing runs with it paused (``collector_paused``); the use cases in ``core`` know
nothing of it. Freezing the start-up objects out of its sight (``gc.freeze``) was here
too; it made no measurable difference to a request and went (docs/decisions.md "Read
path")."""
from __future__ import annotations

import contextlib
import gc
import threading

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
