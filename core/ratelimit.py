"""Token buckets: the partner API's per-token limit and per-IP failed-auth brake.

Time is passed in (seconds from a monotonic clock), so tests drive buckets with a fake
clock instead of sleeping.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after: int  # whole seconds until one token is back; 0 when allowed
    limit: int = 0  # the bucket's size
    full_after: float = 0.0  # seconds until the bucket is full again


def decide(allowed: bool, tokens: float, rate: float, capacity: float) -> Decision:
    """The decision for a bucket of ``capacity`` filling at ``rate`` that holds ``tokens``
    after the request (one taken when ``allowed``)."""
    full_after = (capacity - tokens) / rate
    if allowed:
        return Decision(True, int(tokens), 0, int(capacity), full_after)
    return Decision(False, 0, max(1, math.ceil((1.0 - tokens) / rate)), int(capacity), full_after)


class TokenBucket:
    __slots__ = ("rate", "capacity", "tokens", "stamp")

    def __init__(self, rate: float, capacity: float, now: float):
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now

    def take(self, now: float) -> Decision:
        elapsed = max(0.0, now - self.stamp)
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.stamp = now
        allowed = self.tokens >= 1.0
        if allowed:
            self.tokens -= 1.0
        return decide(allowed, self.tokens, self.rate, self.capacity)


class BucketTable:
    """One bucket per key, bounded: the least recently used keys are forgotten first.

    A forgotten key starts again with a full bucket, which only ever errs towards
    allowing; the bound keeps memory flat when many source addresses knock.
    """

    def __init__(self, rate: float, burst: float, max_keys: int = 100_000):
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be greater than 0")
        self.rate = rate
        self.burst = burst
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def take(self, key: str, now: float, *, rate: float | None = None, burst: float | None = None) -> Decision:
        """``rate`` and ``burst`` override the table's for a key's first bucket (per-key limits)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(rate or self.rate, burst or self.burst, now)
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        return bucket.take(now)
