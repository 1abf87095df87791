"""Panel API keys and browser sessions: a key never holds more than its creator, secrets
are checked in full, and an ended key or session stops working at once."""
from __future__ import annotations

from datetime import timedelta

import pytest

from core.panel import access, sessions as panel_sessions
from core.errors import Forbidden, Invalid, NotFound, Unauthorized
from tests.support.fakes import principal_of


def _keys(uow):
    return access.list_api_keys(uow)


def test_a_key_authenticates_with_its_full_secret_only(uow, clock):
    key, raw = access.create_api_key(uow, clock, name=" ci ", role="viewer", rate_limit_rpm=60)
    assert raw.startswith(f"slw_{key.id}_") and key.name == "ci" and raw.split("_", 2)[2] not in repr(key)
    principal = access.authenticate_key(uow, clock, raw)
    assert principal.key == key and "services:read" in principal.permissions
    for wrong in (raw[:-1] + ("A" if raw[-1] != "A" else "B"), raw + "x", None, "", f"slw_{key.id}"):
        with pytest.raises(Unauthorized):
            access.authenticate_key(uow, clock, wrong)


def test_revoked_and_expired_keys_stop_at_once(uow, clock):
    _, expiring = access.create_api_key(uow, clock, name="e", role="admin", rate_limit_rpm=60,
                                              expires_at=clock.now() + timedelta(hours=1))
    key, raw = access.create_api_key(uow, clock, name="r", role="admin", rate_limit_rpm=60)
    access.revoke_api_key(uow, clock, key.id)
    with pytest.raises(Unauthorized):
        access.authenticate_key(uow, clock, raw)
    with pytest.raises(NotFound):
        access.revoke_api_key(uow, clock, key.id)  # revoked twice
    access.authenticate_key(uow, clock, expiring)
    clock.advance(3600)
    with pytest.raises(Unauthorized):
        access.authenticate_key(uow, clock, expiring)
    assert [k.name for k in _keys(uow)] == ["e"]


@pytest.mark.parametrize("options, field", [
    ({"role": "root"}, "role"), ({"role": "customer"}, "customerId"),
    ({"role": "admin", "customer_id": "cust_x"}, "customerId"), ({"rate_limit_rpm": 0}, "rateLimitRpm"),
    ({"rate_limit_rpm": True}, "rateLimitRpm"), ({"denied_permissions": ("services:fly",)}, "deniedPermissions"),
    ({"name": " "}, "name"),
])
def test_invalid_keys_are_refused_and_nothing_is_stored(uow, clock, options, field):
    values = {"name": "k", "role": "admin", "rate_limit_rpm": 60, **options}
    with pytest.raises(Invalid) as raised:
        access.create_api_key(uow, clock, **values)
    assert field in raised.value.fields and _keys(uow) == []


def test_a_customer_key_needs_an_existing_customer(uow, clock, customer):
    with pytest.raises(Invalid, match="invalid API key"):
        access.create_api_key(uow, clock, name="k", role="customer", customer_id="cust_missing",
                                    rate_limit_rpm=60)
    with pytest.raises(Invalid):
        access.create_api_key(uow, clock, name="k", role="admin", rate_limit_rpm=60,
                                    expires_at=clock.now())
    assert _keys(uow) == []
    principal = principal_of(uow, clock, "customer", customer_id=customer.id)
    assert principal.customer_id == customer.id and "customers:read" not in principal.permissions


def test_a_key_never_holds_more_than_its_creator(uow, clock, customer):
    limited = principal_of(uow, clock, "admin", denied_permissions=("api_keys:manage",), rate_limit_rpm=100,
                           expires_at=clock.now() + timedelta(days=1))
    refusals = [
        ({"role": "admin"}, "api_keys:manage"),
        ({"role": "viewer", "rate_limit_rpm": 101}, "rateLimitRpm 101"),
        ({"role": "viewer", "expires_at": None}, "expiresAt never"),
        ({"role": "viewer", "expires_at": clock.now() + timedelta(days=2)}, "expiresAt"),
    ]
    before = len(_keys(uow))
    for options, named in refusals:
        values = {"name": "child", "rate_limit_rpm": 50, "expires_at": clock.now() + timedelta(hours=1), **options}
        with pytest.raises(Forbidden, match=named):
            access.create_api_key(uow, clock, creator=limited, **values)
    assert len(_keys(uow)) == before
    child, _ = access.create_api_key(uow, clock, name="child", role="admin", rate_limit_rpm=100,
                                           denied_permissions=("api_keys:manage",), creator=limited,
                                           expires_at=clock.now() + timedelta(days=1))
    assert "api_keys:manage" not in access.permissions_of(child)


def test_a_customer_key_mints_only_keys_of_its_customer(uow, clock, customer):
    from core.panel import customers as panel_customers

    other = panel_customers.create_customer(uow, clock, name="Other")
    creator = principal_of(uow, clock, "customer", customer_id=customer.id)
    for role, cid in (("customer", other.id), ("viewer", None)):
        with pytest.raises(Forbidden):
            access.create_api_key(uow, clock, name="k", role=role, customer_id=cid, rate_limit_rpm=60,
                                        creator=creator)
    access.create_api_key(uow, clock, name="k", role="customer", customer_id=customer.id, rate_limit_rpm=60,
                                creator=creator)


def test_a_key_revokes_only_keys_within_its_own_bounds(uow, clock, customer):
    admin, _ = access.create_api_key(uow, clock, name="ops", role="admin", rate_limit_rpm=60)
    manager = principal_of(uow, clock, "admin", denied_permissions=tuple(
        p for p in access.PERMISSIONS if p != "api_keys:manage"))
    with pytest.raises(Forbidden, match="cannot revoke.*services:read"):
        access.revoke_api_key(uow, clock, admin.id, revoker=manager)
    assert admin.id in {k.id for k in _keys(uow)}  # still valid
    narrow, _ = access.create_api_key(uow, clock, name="n", role="admin", rate_limit_rpm=60, creator=manager,
                                      denied_permissions=manager.key.denied_permissions)
    access.revoke_api_key(uow, clock, narrow.id, revoker=manager)
    access.revoke_api_key(uow, clock, manager.key.id, revoker=manager)  # itself: within its bounds
    bound = principal_of(uow, clock, "customer", customer_id=customer.id)
    theirs, _ = access.create_api_key(uow, clock, name="t", role="customer", rate_limit_rpm=60,
                                      customer_id=customer.id)
    with pytest.raises(Forbidden, match="api_keys:manage"):  # a customer key holds no api_keys:manage
        access.revoke_api_key(uow, clock, admin.id, revoker=bound)
    access.revoke_api_key(uow, clock, theirs.id, revoker=bound)  # the route's permission is checked before


def test_a_key_without_rate_limit_rpm_gets_the_default_at_most_its_creators(uow, clock):
    made, _ = access.create_api_key(uow, clock, name="k", role="viewer", rate_limit_rpm=None, default_rpm=77)
    assert made.rate_limit_rpm == 77
    slow = principal_of(uow, clock, "admin", rate_limit_rpm=50)
    capped, _ = access.create_api_key(uow, clock, name="k", role="viewer", rate_limit_rpm=None, default_rpm=77,
                                      creator=slow)
    assert capped.rate_limit_rpm == 50
    with pytest.raises(Forbidden, match="rateLimitRpm 60"):
        access.create_api_key(uow, clock, name="k", role="viewer", rate_limit_rpm=60, creator=slow)


def test_denied_permissions_are_refused(uow, clock):
    principal = principal_of(uow, clock, "admin", denied_permissions=("services:delete",))
    principal.require("services:read")
    with pytest.raises(Forbidden, match="services:delete"):
        principal.require("services:delete")


# --- sessions ---------------------------------------------------------------------------------


def test_panel_user_rules(uow, clock, customer):
    user = panel_sessions.set_user(uow, clock, email=" Ann@Example.TEST ", role="viewer")
    assert user.email == "ann@example.test"
    for options in ({"email": "nope", "role": "viewer"}, {"email": "a@b.c", "role": "god"},
                    {"email": "a@b.c", "role": "customer"}, {"email": "a@b.c", "role": "admin",
                                                             "customer_id": customer.id}):
        with pytest.raises(Invalid):
            panel_sessions.set_user(uow, clock, **options)
    with pytest.raises(NotFound):
        panel_sessions.set_user(uow, clock, email="b@b.c", role="customer", customer_id="cust_missing")
    changed = panel_sessions.set_user(uow, clock, email="ann@example.test", role="customer", customer_id=customer.id)
    assert changed.created_at == user.created_at
    assert [u.email for u in panel_sessions.list_users(uow)] == ["ann@example.test"]


def test_a_login_state_is_good_once_and_for_ten_minutes(uow, clock):
    state, nonce, verifier = panel_sessions.begin_login(uow, clock, next_path="/services")
    pending = panel_sessions.finish_login(uow, clock, state)
    assert (pending.nonce, pending.code_verifier, pending.next_path) == (nonce, verifier, "/services")
    with pytest.raises(Invalid):
        panel_sessions.finish_login(uow, clock, state)
    late, _, _ = panel_sessions.begin_login(uow, clock, next_path="/")
    clock.advance(600)
    with pytest.raises(Invalid):
        panel_sessions.finish_login(uow, clock, late)
    with pytest.raises(Invalid):
        panel_sessions.finish_login(uow, clock, late)  # taken even though it had expired


@pytest.mark.parametrize("path, safe", [("/services?x=1", True), ("//evil.test", False), ("/\\evil", False),
                                        ("https://evil.test", False), ("/a b", False), (None, False)])
def test_next_paths_stay_on_this_host(path, safe):
    assert (panel_sessions.safe_next(path) is not None) == safe


def test_sessions_open_for_panel_users_only_and_end_at_once(uow, clock):
    with pytest.raises(Forbidden):
        panel_sessions.open_session(uow, clock, email="stranger@example.test", ttl_seconds=3600)
    panel_sessions.set_user(uow, clock, email="ann@example.test", role="viewer")
    session, user, secret = panel_sessions.open_session(uow, clock, email="ANN@example.test", ttl_seconds=3600)
    assert secret not in session.id and user.role == "viewer"
    principal = panel_sessions.authenticate_session(uow, clock, secret)
    assert principal.bucket_id == "session:" + session.id and principal.customer_id is None
    with pytest.raises(Forbidden, match="viewer"):
        principal.require("services:deploy")
    assert panel_sessions.revoke_session(uow, clock, secret) is True
    assert panel_sessions.revoke_session(uow, clock, secret) is False
    with pytest.raises(Unauthorized):
        panel_sessions.authenticate_session(uow, clock, secret)
    _, _, later = panel_sessions.open_session(uow, clock, email="ann@example.test", ttl_seconds=60)
    clock.advance(60)
    for secret in (later, "x" * 300, None):
        with pytest.raises(Unauthorized):
            panel_sessions.authenticate_session(uow, clock, secret)


def test_a_removed_user_loses_its_sessions_and_signs_in_no_more(uow, clock):
    panel_sessions.set_user(uow, clock, email="ann@example.test", role="viewer")
    _, _, secret = panel_sessions.open_session(uow, clock, email="ann@example.test", ttl_seconds=3600)
    removed = panel_sessions.remove_user(uow, " ANN@example.test ")
    assert removed.email == "ann@example.test" and panel_sessions.list_users(uow) == []
    with pytest.raises(Unauthorized):
        panel_sessions.authenticate_session(uow, clock, secret)
    with pytest.raises(Forbidden):
        panel_sessions.open_session(uow, clock, email="ann@example.test", ttl_seconds=3600)
    with pytest.raises(NotFound):
        panel_sessions.remove_user(uow, "ann@example.test")


def test_lapsed_tells_why_a_connection_must_end(uow, clock, customer):
    panel_sessions.set_user(uow, clock, email="ann@example.test", role="viewer")
    _, _, secret = panel_sessions.open_session(uow, clock, email="ann@example.test", ttl_seconds=3600)
    session = panel_sessions.authenticate_session(uow, clock, secret)
    keep = principal_of(uow, clock, "viewer")
    revoked = principal_of(uow, clock, "viewer")
    expiring = principal_of(uow, clock, "viewer", expires_at=clock.now() + timedelta(minutes=5))
    assert panel_sessions.lapsed(uow, clock, [session, keep, revoked, expiring]) == [None] * 4
    access.revoke_api_key(uow, clock, revoked.key.id)
    panel_sessions.set_user(uow, clock, email="ann@example.test", role="admin")
    clock.advance(300)
    assert panel_sessions.lapsed(uow, clock, [session, keep, revoked, expiring]) == [
        panel_sessions.USER_CHANGED, None, panel_sessions.KEY_REVOKED, panel_sessions.KEY_EXPIRED]
    panel_sessions.revoke_session(uow, clock, secret)
    assert panel_sessions.lapsed(uow, clock, [session]) == [panel_sessions.SESSION_ENDED]


def test_a_job_records_who_asked_an_auth_sources_caller_by_source_and_subject():
    from core.panel.services import CALLER_NAME_MAX, caller_name

    def signed_in(subject):
        return access.SourcePrincipal(key=None, permissions=access.ROLES["admin"], source="hello", subject=subject,
                                      role="admin")

    assert caller_name(signed_in("alice@example.com")) == "source:hello:alice@example.com"
    long, other = caller_name(signed_in("x" * 200)), caller_name(signed_in("x" * 199 + "y"))
    assert len(long) <= CALLER_NAME_MAX and long.startswith("source:hello:~") and long != other
    assert caller_name(None) == "system"
