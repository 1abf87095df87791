"""Partner API rate limits, driven by a fake clock: per-token bucket and failed-auth brake."""
from __future__ import annotations

import ipaddress

import pytest

from app.config import Config, ConfigError

RATE_LIMITED = {"error": {"code": "too-many-requests", "message": "rate limit exceeded"}}


def test_per_token_bucket_allows_the_burst_then_refills_at_the_rate(make_app, world, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(rate_rps=10, rate_burst=30))
    _, secret = world.token(world.partner())
    for _ in range(30):
        client.get("/v1/me", token=secret, expect=200)
    refused = client.get("/v1/me", token=secret, expect=429)
    assert refused.json == RATE_LIMITED
    assert refused.headers["retry-after"] == "1"
    clock.advance(0.1)  # one token back at 10/s
    client.get("/v1/me", token=secret, expect=200)
    client.get("/v1/me", token=secret, expect=429)
    clock.advance(3)  # 30 tokens back
    for _ in range(30):
        client.get("/v1/me", token=secret, expect=200)


def test_retry_after_is_whole_seconds_at_least_one(make_app, world):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(rate_rps=0.25, rate_burst=1))
    _, secret = world.token(world.partner())
    client.get("/v1/me", token=secret, expect=200)
    assert client.get("/v1/me", token=secret, expect=429).headers["retry-after"] == "4"


def test_buckets_are_per_token_and_cover_every_authenticated_request(make_app, world):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(rate_rps=1, rate_burst=2))
    partner = world.partner()
    _, first = world.token(partner)
    _, second = world.token(partner)
    client.get("/v1/me", token=first, expect=200)
    client.post("/v1/tokens", token=first, json_body={"label": "", "scope": "x"}, expect=422)  # counted too
    client.get("/v1/tokens", token=first, expect=429)
    client.get("/v1/me", token=second, expect=200)


def test_rate_limit_comes_before_scope(make_app, world):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(rate_rps=1, rate_burst=1))
    _, read_secret = world.token(world.partner(), scope="read")
    client.post("/v1/tokens", token=read_secret, json_body={"label": "x", "scope": "read"}, expect=403)
    client.post("/v1/tokens", token=read_secret, json_body={"label": "x", "scope": "read"}, expect=429)


def test_failed_authentication_brake_per_source_ip(client, world, clock):
    _, secret = world.token(world.partner())
    client.get("/v1/me", token="pcp_" + "x" * 40, remote_addr="10.0.0.1", expect=401)
    refused = client.get("/v1/me", token="pcp_" + "x" * 40, remote_addr="10.0.0.1", expect=429)
    assert refused.json == RATE_LIMITED and refused.headers["retry-after"] == "1"
    client.get("/v1/me", remote_addr="10.0.0.1", expect=429)  # missing token counts as failed too
    client.get("/v1/me", token="bad", remote_addr="10.0.0.2", expect=401)  # another address has its own
    # a request that authenticates never touches the brake, even from a braked address
    for _ in range(5):
        client.get("/v1/me", token=secret, remote_addr="10.0.0.1", expect=200)
    clock.advance(1)
    client.get("/v1/me", token="bad", remote_addr="10.0.0.1", expect=401)
    client.get("/v1/me", token="bad", remote_addr="10.0.0.1", expect=429)


def test_successful_requests_do_not_drain_the_brake(client, world):
    _, secret = world.token(world.partner())
    for _ in range(10):
        client.get("/v1/me", token=secret, remote_addr="10.0.0.9", expect=200)
    client.get("/v1/me", token="bad", remote_addr="10.0.0.9", expect=401)


def test_forwarded_for_is_believed_only_from_trusted_proxies(make_app, world):
    from tests.support.contract_client import ContractClient

    trusted = (ipaddress.ip_network("10.1.0.0/16"),)
    client = ContractClient(make_app(trusted_proxies=trusted))
    bad = "pcp_" + "y" * 40
    # behind the trusted proxy, each forwarded client has its own brake
    client.get("/v1/me", token=bad, remote_addr="10.1.2.3", headers={"X-Forwarded-For": "203.0.113.7"},
               expect=401)
    client.get("/v1/me", token=bad, remote_addr="10.1.2.3", headers={"X-Forwarded-For": "203.0.113.8"},
               expect=401)
    client.get("/v1/me", token=bad, remote_addr="10.1.9.9", headers={"X-Forwarded-For": "203.0.113.7"},
               expect=429)
    # a client cannot escape by writing its own X-Forwarded-For in front of the proxy's entry
    client.get("/v1/me", token=bad, remote_addr="10.1.2.3",
               headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.8"}, expect=429)
    # from an untrusted peer the header is ignored: the peer address is the key
    client.get("/v1/me", token=bad, remote_addr="192.0.2.5", headers={"X-Forwarded-For": "203.0.113.50"},
               expect=401)
    client.get("/v1/me", token=bad, remote_addr="192.0.2.5", headers={"X-Forwarded-For": "203.0.113.51"},
               expect=429)


@pytest.mark.parametrize("name", ["PC_RATE_RPS", "PC_RATE_BURST", "PC_AUTHFAIL_RPS"])
@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", "1e999"])
def test_start_up_is_refused_for_bad_limits(name, value):
    with pytest.raises(ConfigError) as info:
        Config.from_env({name: value})
    assert name in str(info.value) and "greater than 0" in str(info.value)


def test_limits_from_the_environment():
    config = Config.from_env({"PC_RATE_RPS": "2.5", "PC_RATE_BURST": "7", "PC_AUTHFAIL_RPS": "0.5",
                              "SLIPWAY_TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/24"})
    assert (config.rate_rps, config.rate_burst, config.authfail_rps) == (2.5, 7, 0.5)
    assert [str(n) for n in config.trusted_proxies] == ["10.0.0.1/32", "192.168.0.0/24"]
    with pytest.raises(ConfigError, match="SLIPWAY_TRUSTED_PROXIES"):
        Config.from_env({"SLIPWAY_TRUSTED_PROXIES": "not-an-ip"})
