"""Token buckets and source addresses: pure functions of a fake time."""
import ipaddress

from app.http.clientaddr import client_address
from core.ratelimit import BucketTable, TokenBucket


def test_bucket_burst_refill_and_retry_after():
    bucket = TokenBucket(rate=2, capacity=3, now=0)
    assert [bucket.take(0).allowed for _ in range(4)] == [True, True, True, False]
    assert bucket.take(0).retry_after == 1
    assert bucket.take(0.5).allowed  # one token back after 0.5 s at 2/s
    assert not bucket.take(0.5).allowed
    assert bucket.take(100).remaining == 2  # capped at capacity, minus the one taken


def test_retry_after_rounds_up_to_whole_seconds():
    bucket = TokenBucket(rate=0.3, capacity=1, now=0)
    bucket.take(0)
    assert bucket.take(0).retry_after == 4  # 1/0.3 = 3.33 s


def test_table_forgets_least_recently_used_keys():
    table = BucketTable(rate=1, burst=1, max_keys=2)
    table.take("a", 0)
    table.take("b", 0)
    assert not table.take("a", 0).allowed  # "a" is now the most recent
    table.take("c", 0)  # evicts "b"
    assert table.take("b", 0).allowed
    assert len(table._buckets) == 2


def test_client_address():
    trusted = (ipaddress.ip_network("10.0.0.0/8"),)
    assert client_address("192.0.2.1", "203.0.113.9", trusted) == "192.0.2.1"
    assert client_address("10.0.0.1", "203.0.113.9", trusted) == "203.0.113.9"
    assert client_address("10.0.0.1", "1.1.1.1, 203.0.113.9, 10.0.0.2", trusted) == "203.0.113.9"
    assert client_address("10.0.0.1", "10.0.0.3, 10.0.0.2", trusted) == "10.0.0.3"
    assert client_address("10.0.0.1", None, trusted) == "10.0.0.1"
    assert client_address("10.0.0.1", "203.0.113.9", ()) == "10.0.0.1"
