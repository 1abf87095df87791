"""Address buckets group IPv6 clients by their /64: the panel's anonymous tier (and the
sign-in, which draws on it) and the partner API's failed-authentication brake, whether
the address is the peer's or a trusted proxy's X-Forwarded-For."""
from __future__ import annotations

import ipaddress

from tests.support.contract_client import ContractClient

SAME = ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2:aaaa:bbbb:cccc:dddd")
OTHER = "2001:db8:1:3::1"


def test_one_64_shares_the_anonymous_tier(make_app):
    client = ContractClient(make_app(rate_anon_rpm=2))
    assert [client.get("/api/services", remote_addr=a).status_code for a in SAME] == [401, 401, 429]
    assert client.get("/api/services", remote_addr=OTHER).status_code == 401
    # the sign-in draws on the same bucket
    signin = client.post("/api/auth/key", remote_addr=SAME[0], json_body={"key": "slw_x_y"},
                         headers={"X-Requested-With": "t"})
    assert signin.status_code == 429 and signin.headers["Retry-After"]


def test_one_64_behind_a_trusted_proxy_shares_the_anonymous_tier(make_app):
    client = ContractClient(make_app(rate_anon_rpm=2, trusted_proxies=(ipaddress.ip_network("10.1.0.0/16"),)))
    answers = [client.get("/api/services", remote_addr="10.1.0.5", headers={"X-Forwarded-For": a}).status_code
               for a in SAME]
    assert answers == [401, 401, 429]
    assert client.get("/api/services", remote_addr="10.1.0.5",
                      headers={"X-Forwarded-For": OTHER}).status_code == 401


def test_one_64_shares_the_failed_authentication_brake(make_app):
    client = ContractClient(make_app(authfail_rps=1))
    bad = "pcp_" + "y" * 40
    client.get("/v1/me", token=bad, remote_addr=SAME[0], expect=401)
    client.get("/v1/me", token=bad, remote_addr=SAME[1], expect=429)
    client.get("/v1/me", token=bad, remote_addr=OTHER, expect=401)
    # an IPv4-mapped IPv6 peer is its IPv4 address
    client.get("/v1/me", token=bad, remote_addr="203.0.113.7", expect=401)
    client.get("/v1/me", token=bad, remote_addr="::ffff:203.0.113.7", expect=429)
