"""The key of an address bucket: an IPv6 client's /64, IPv4 (and IPv4-mapped IPv6) unchanged."""
from app.http.clientaddr import address_bucket


def test_ipv6_addresses_map_to_their_64():
    assert address_bucket("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_bucket("2001:db8:1:2:ffff:eeee:dddd:cccc") == "2001:db8:1:2::/64"
    assert address_bucket("[2001:DB8:1:2::7]") == "2001:db8:1:2::/64"
    assert address_bucket("2001:db8:1:3::1") == "2001:db8:1:3::/64"


def test_ipv4_and_mapped_ipv4_are_the_address_itself():
    assert address_bucket("203.0.113.7") == "203.0.113.7"
    assert address_bucket("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_bucket("::ffff:cb00:7107") == "203.0.113.7"


def test_what_is_not_an_address_stays_itself():
    assert address_bucket("unknown") == "unknown"
    assert address_bucket("") == ""
