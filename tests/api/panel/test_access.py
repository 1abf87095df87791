"""Panel API: API keys, roles and denied permissions, expiry, rate tiers and their
headers, customers, templates, and the panel error format."""
from __future__ import annotations

from datetime import timedelta

import pytest
import yaml

from core.panel import access, customers as panel_customers


@pytest.fixture
def keys(store, clock):
    def make(role="admin", rpm=1000, **kw):
        return access.create_api_key(store.uow(), clock, name=f"{role} key", role=role, rate_limit_rpm=rpm,
                                           **kw)[1]

    return make


@pytest.fixture
def admin(keys):
    return keys("admin")


def test_contract_needs_a_key_and_lists_the_deploy_methods(client, admin):
    client.get("/api/openapi.yaml", expect=401)
    document = yaml.safe_load(client.get("/api/openapi.yaml", token=admin, expect=200).text)
    assert document["openapi"] == "3.1.0"
    assert document["components"]["schemas"]["DeployMethod"]["enum"] == ["ai", "compose", "git", "template"]


def test_api_key_lifecycle(client, admin, store):
    created = client.post("/api/v1/api-keys", token=admin, json_body={
        "name": "ci", "role": "viewer", "rateLimitRpm": 60, "deniedPermissions": ["services:logs"]},
        expect=201).json
    assert created["key"].startswith(f"slw_{created['id']}_") and created["keyPrefix"] == f"slw_{created['id']}"
    assert created["role"] == "viewer" and created["deniedPermissions"] == ["services:logs"]
    with store.db.connection_context():
        row = store.models.PanelApiKey.get_by_id(created["id"])
        assert created["key"].split("_", 2)[2] not in str(row.__data__)  # only a hash is stored
    client.get("/api/templates", token=created["key"], expect=200)
    listed = client.get("/api/v1/api-keys", token=admin, expect=200).json
    assert listed["total"] == 2 and all("key" not in k for k in listed["data"])
    client.delete(f"/api/v1/api-keys/{created['id']}", token=admin, expect=204)
    client.get("/api/templates", token=created["key"], expect=401)
    client.delete(f"/api/v1/api-keys/{created['id']}", token=admin, expect=404)


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer slw_x_y", "Basic abc",
                                    "Bearer slw_0123456789abcdef_" + "A" * 40, "Bearer pcp_" + "a" * 40])
def test_missing_malformed_and_unknown_keys_are_401(client, header):
    headers = {"Authorization": header} if header is not None else {}
    result = client.get("/api/templates", headers=headers, expect=401)
    assert result.json["error"]["code"] == "unauthorized"


def test_a_wrong_secret_for_a_real_key_id_is_401(client, admin):
    prefix, key_id, secret = admin.split("_", 2)
    client.get("/api/templates", token=f"{prefix}_{key_id}_{'B' * len(secret)}", expect=401)


def test_expired_keys_are_401(client, keys, clock):
    key = keys("viewer", expires_at=clock.now() + timedelta(hours=1))
    client.get("/api/templates", token=key, expect=200)
    clock.advance(3600)
    client.get("/api/templates", token=key, expect=401)


@pytest.mark.parametrize("role, allowed, denied", [
    ("viewer", [("GET", "/api/customers"), ("GET", "/api/templates")],
     [("POST", "/api/customers"), ("GET", "/api/v1/api-keys"), ("POST", "/api/v1/api-keys")]),
    ("customer", [("GET", "/api/templates")],
     [("GET", "/api/customers"), ("POST", "/api/customers"), ("GET", "/api/v1/api-keys")]),
    ("admin", [("GET", "/api/customers"), ("GET", "/api/templates"), ("GET", "/api/v1/api-keys")], []),
])
def test_roles(client, keys, store, clock, role, allowed, denied):
    extra = {}
    if role == "customer":
        extra["customer_id"] = panel_customers.create_customer(store.uow(), clock, name="Own").id
    key = keys(role, **extra)
    for method, path in allowed:
        client.request(method, path, token=key, expect=200)
    for method, path in denied:
        result = client.request(method, path, token=key, json_body={"name": "x"} if method == "POST" else None,
                                expect=403)
        assert result.json["error"]["code"] == "forbidden"


def test_denied_permissions_override_the_role(client, keys):
    key = keys("admin", denied_permissions=["templates:read", "customers:write"])
    client.get("/api/templates", token=key, expect=403)
    client.post("/api/customers", token=key, json_body={"name": "x"}, expect=403)
    client.get("/api/customers", token=key, expect=200)


@pytest.mark.parametrize("body, field, status", [
    ({"name": "x", "role": "root", "rateLimitRpm": 10}, "role", 422),
    ({"name": "x", "role": "viewer", "rateLimitRpm": 0}, "rateLimitRpm", 422),
    ({"name": "x", "role": "viewer", "rateLimitRpm": "fast"}, "rateLimitRpm", 422),
    ({"name": "", "role": "viewer", "rateLimitRpm": 10}, "name", 422),
    ({"name": "x", "role": "viewer", "rateLimitRpm": 10, "deniedPermissions": ["everything"]}, "deniedPermissions.0",
     422),
    ({"name": "x", "role": "customer", "rateLimitRpm": 10}, "customerId", 422),
    ({"name": "x", "role": "viewer", "rateLimitRpm": 10, "customerId": "cust_1"}, "customerId", 422),
    ({"name": "x", "role": "viewer", "rateLimitRpm": 10, "expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt", 422),
    ({"name": "x", "role": "viewer", "rateLimitRpm": 10, "expiresAt": "soon"}, "expiresAt", 422),
    ({"name": "x", "role": "customer", "rateLimitRpm": 10, "customerId": "cust_nope"}, "customerId", 422),
])
def test_api_key_validation(client, admin, body, field, status):
    result = client.post("/api/v1/api-keys", token=admin, json_body=body, expect=status)
    if field:
        assert result.json["error"]["code"] == "validation_error" and field in result.json["error"]["fields"]
    assert client.get("/api/v1/api-keys", token=admin).json["total"] == 1


def test_per_key_rate_limit_and_headers_on_every_response(client, keys, clock):
    key = keys("viewer", rpm=3)
    first = client.get("/api/templates", token=key, expect=200)
    assert first.headers["x-ratelimit-limit"] == "3" and first.headers["x-ratelimit-remaining"] == "2"
    assert int(first.headers["x-ratelimit-reset"]) >= int(clock.now().timestamp())
    forbidden = client.post("/api/customers", token=key, json_body={"name": "x"}, expect=403)
    assert forbidden.headers["x-ratelimit-remaining"] == "1"
    missing = client.get("/api/customers/cust_nope", token=key, expect=404)
    assert missing.headers["x-ratelimit-remaining"] == "0"
    refused = client.get("/api/templates", token=key, expect=429)
    assert refused.json["error"]["code"] == "rate_limited" and int(refused.headers["retry-after"]) >= 1
    assert refused.headers["x-ratelimit-remaining"] == "0"
    clock.advance(20)  # 3/min: one back every 20 s
    client.get("/api/templates", token=key, expect=200)


def test_unauthenticated_requests_draw_on_60_per_minute_per_address(client, admin, clock):
    for i in range(60):
        result = client.get("/api/templates", remote_addr="10.9.9.9", expect=401)
    assert result.headers["x-ratelimit-limit"] == "60" and result.headers["x-ratelimit-remaining"] == "0"
    client.get("/api/templates", remote_addr="10.9.9.9", expect=429)
    client.get("/api/templates", remote_addr="10.9.9.8", expect=401)
    client.get("/api/templates", token=admin, remote_addr="10.9.9.9", expect=200)  # keys have their own


def test_customers_crud_list_and_errors(client, admin, clock):
    made = []
    for name in ("Charlie", "alpha", "Bravo"):
        clock.advance(1)
        made.append(client.post("/api/customers", token=admin, json_body={"name": name, "email": f"{name}@x.io"},
                                expect=201).json)
    assert all(c["id"].startswith("cust_") for c in made)
    listed = client.get("/api/customers", token=admin, expect=200).json
    assert [c["name"] for c in listed["data"]] == ["Charlie", "alpha", "Bravo"]  # created_at ascending
    assert (listed["total"], listed["page"], listed["per_page"]) == (3, 1, 20)
    page = client.get("/api/customers", token=admin, params={"per_page": "2", "page": "2", "sort": "created_at",
                                                             "order": "desc"}).json
    assert [c["name"] for c in page["data"]] == ["Charlie"] and page["total"] == 3
    assert client.get("/api/customers", token=admin, params={"page": "9"}).json["data"] == []
    assert [c["name"] for c in client.get("/api/customers", token=admin, params={"search": "rav"}).json["data"]] == \
        ["Bravo"]
    for bad in ({"page": "0"}, {"per_page": "101"}, {"per_page": "x"}, {"sort": "age"}, {"order": "up"}):
        assert client.get("/api/customers", token=admin, params=bad, expect=400).json["error"]["code"] == \
            "bad_request"
    one = made[0]["id"]
    assert client.get(f"/api/customers/{one}", token=admin, expect=200).json == made[0]
    patched = client.patch(f"/api/customers/{one}", token=admin, json_body={"email": "new@x.io"}, expect=200).json
    assert patched["email"] == "new@x.io" and patched["name"] == "Charlie"
    result = client.patch(f"/api/customers/{one}", token=admin, json_body={"email": "nope"}, expect=422).json
    assert result["error"]["fields"] == {"email": "must be an email address"}
    client.post("/api/customers", token=admin, json_body={"email": "a@b.co"}, expect=422)
    client.post("/api/customers", token=admin, body="{", headers={"Content-Type": "application/json"}, expect=400)
    client.post("/api/customers", token=admin, body='{"name": "x"}', headers={"Content-Type": "text/plain"},
                expect=415)
    client.post("/api/customers", token=admin, json_body={"name": "x" * (1024 * 1024)}, expect=413)
    client.delete(f"/api/customers/{one}", token=admin, expect=204)
    client.get(f"/api/customers/{one}", token=admin, expect=404)
    client.delete(f"/api/customers/{one}", token=admin, expect=404)


def test_a_customer_with_keys_cannot_be_deleted(client, admin, keys, store, clock):
    customer = panel_customers.create_customer(store.uow(), clock, name="Keyed")
    keys("customer", customer_id=customer.id)
    assert client.delete(f"/api/customers/{customer.id}", token=admin, expect=409).json["error"]["code"] == \
        "conflict"


def test_templates_catalog(client, admin):
    listed = client.get("/api/templates", token=admin, expect=200).json
    ids = [t["id"] for t in listed["data"]]
    assert ids == sorted(ids) and {"static-site", "redis", "postgres", "wordpress"} <= set(ids)
    postgres = next(t for t in listed["data"] if t["id"] == "postgres")
    assert {"name": "POSTGRES_PASSWORD", "default": None, "required": False, "secret": True,
            "description": "Password of the postgres superuser (generated when not given)"} in postgres["variables"]
    databases = client.get("/api/templates", token=admin, params={"category": "database"}).json
    assert {t["id"] for t in databases["data"]} == {"postgres", "mariadb", "redis"} and databases["total"] == 3
    assert client.get("/api/templates", token=admin, params={"category": "games"}).json["data"] == []
    page = client.get("/api/templates", token=admin, params={"per_page": "1", "page": "2"}).json
    assert len(page["data"]) == 1 and page["total"] == len(ids)


def test_a_plugin_adds_and_replaces_templates(make_app, admin):
    from ports import hookimpl
    from tests.support.contract_client import ContractClient

    class HostingCompany:
        @hookimpl
        def register_templates(self):
            return [{"id": "redis", "name": "Our Redis", "category": "database", "description": "tuned",
                     "compose": "services: {}", "variables": []},
                    {"id": "minecraft", "name": "Minecraft", "category": "games", "description": "",
                     "compose": "services: {}", "variables": []}]

    client = ContractClient(make_app(plugins=(HostingCompany(),)))
    listed = {t["id"]: t for t in client.get("/api/templates", token=admin, expect=200).json["data"]}
    assert listed["redis"]["name"] == "Our Redis" and "minecraft" in listed and "postgres" in listed


def test_unknown_panel_routes_and_methods_use_the_panel_format(client, admin):
    for path in ["/api/nope", "/api", "/healthz/nope"]:
        result = client.get(path, token=admin, expect=404)
        assert result.json == {"error": {"code": "not_found", "message": "no such route"}}
    for path in ["/", "/favicon.ico"]:  # outside /api: the web frontend's page (tests/api/panel/test_frontend_serving.py)
        assert client.http.simulate_get(path).headers["content-type"] == "text/html; charset=utf-8"
    refused = client.request("PUT", "/api/templates", token=admin, expect=405)
    assert refused.json["error"]["code"] == "bad_request" and refused.headers["Allow"] == "GET"
    assert "X-RateLimit-Remaining" in refused.headers
    assert client.request("OPTIONS", "/api/services", token=admin, expect=405).headers["Allow"] == "GET, POST"
    # without credentials, neither route nor method is disclosed: 401, rate headers included
    for method, path in (("GET", "/api/nope"), ("PUT", "/api/templates"), ("OPTIONS", "/api/services"),
                         ("DELETE", "/api")):
        result = client.request(method, path, expect=401)
        assert result.json["error"]["code"] == "unauthorized" and "X-RateLimit-Limit" in result.headers
    assert "X-RateLimit-Remaining" in client.get("/api/nope/deeper", token=admin, expect=404).headers


# --- a key creates only keys within its own bounds (docs/decisions.md "Tenant safety") ----------

def _key_count(store) -> int:
    with store.db.connection_context():
        return store.models.PanelApiKey.select().count()


def _refused(client, store, token, body, *says):
    before = _key_count(store)
    refused = client.post("/api/v1/api-keys", token=token, json_body=body, expect=403).json["error"]
    assert refused["code"] == "forbidden"
    for words in says:
        assert words in refused["message"], refused["message"]
    assert _key_count(store) == before  # nothing was created
    return refused


def test_a_key_creates_no_key_with_a_permission_it_lacks(client, keys, store):
    limited = keys("admin", denied_permissions=["services:delete", "backups:write"])
    _refused(client, store, limited, {"name": "full", "role": "admin", "rateLimitRpm": 10},
             "services:delete", "backups:write")
    _refused(client, store, limited, {"name": "half", "role": "admin", "rateLimitRpm": 10,
                                      "deniedPermissions": ["services:delete"]}, "backups:write")
    within = client.post("/api/v1/api-keys", token=limited, json_body={
        "name": "same", "role": "admin", "rateLimitRpm": 10,
        "deniedPermissions": ["services:delete", "backups:write", "templates:read"]}, expect=201).json
    viewer = client.post("/api/v1/api-keys", token=limited, json_body={
        "name": "viewer", "role": "viewer", "rateLimitRpm": 10}, expect=201).json
    # the new key cannot climb back either
    _refused(client, store, within["key"], {"name": "up", "role": "admin", "rateLimitRpm": 10,
                                            "deniedPermissions": ["services:delete", "backups:write"]},
             "templates:read")
    client.post("/api/v1/api-keys", token=viewer["key"], json_body={"name": "x", "role": "viewer",
                                                                      "rateLimitRpm": 10}, expect=403)


def test_a_key_creates_no_key_above_its_rate_limit(client, keys, store):
    slow = keys("admin", rpm=100)
    _refused(client, store, slow, {"name": "fast", "role": "viewer", "rateLimitRpm": 101}, "rateLimitRpm 101",
             "100")
    assert client.post("/api/v1/api-keys", token=slow, json_body={"name": "same", "role": "viewer",
                                                                   "rateLimitRpm": 100}, expect=201)


def test_a_key_that_expires_creates_no_key_that_outlives_it(client, keys, store, clock):
    from app.http.timefmt import rfc3339

    ends = clock.now() + timedelta(hours=2)
    expiring = keys("admin", expires_at=ends)
    _refused(client, store, expiring, {"name": "forever", "role": "viewer", "rateLimitRpm": 10},
             "expiresAt never", "later than")
    _refused(client, store, expiring, {"name": "later", "role": "viewer", "rateLimitRpm": 10,
                                       "expiresAt": rfc3339(ends + timedelta(seconds=1))}, "expiresAt")
    made = client.post("/api/v1/api-keys", token=expiring, json_body={
        "name": "sooner", "role": "viewer", "rateLimitRpm": 10, "expiresAt": rfc3339(ends)}, expect=201).json
    assert made["expiresAt"] == rfc3339(ends)
    forever = keys("admin")  # a key without expiry may create either
    client.post("/api/v1/api-keys", token=forever, json_body={"name": "f", "role": "viewer", "rateLimitRpm": 10},
                expect=201)


def test_several_excesses_are_named_together_and_validation_comes_first(client, keys, store):
    key = keys("admin", rpm=50, denied_permissions=["customers:write"])
    refused = _refused(client, store, key, {"name": "x", "role": "admin", "rateLimitRpm": 60},
                       "customers:write", "rateLimitRpm 60")
    assert refused["message"].startswith("a key cannot be created with more than its creator holds")
    client.post("/api/v1/api-keys", token=key, json_body={"name": "x", "role": "root", "rateLimitRpm": 60},
                expect=422)


def test_a_customer_key_mints_no_key(client, keys, store, clock):
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")
    key = keys("customer", customer_id=acme.id)
    for body in ({"name": "x", "role": "customer", "rateLimitRpm": 10, "customerId": other.id},
                 {"name": "x", "role": "customer", "rateLimitRpm": 10, "customerId": acme.id}):
        _refused(client, store, key, body, "api_keys:manage")


def test_creators_bound_in_the_use_case(store, clock):
    """The rule itself, also for creators the role table does not let through the gate today:
    a customer-bound creator, and browser sessions (their user's role bounds them; a
    session's own expiry and rate do not)."""
    from core.errors import Forbidden
    from core.panel.sessions import PanelSession, PanelUser, SessionPrincipal

    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")
    bound_key, _ = access.create_api_key(store.uow(), clock, name="c", role="customer", rate_limit_rpm=100,
                                               customer_id=acme.id)
    bound = access.Principal(key=bound_key, permissions=access.ROLES["admin"])  # as if it could manage
    before = _key_count(store)
    for kw in ({"role": "customer", "customer_id": other.id}, {"role": "admin"}, {"role": "viewer"}):
        with pytest.raises(Forbidden, match=f"customer {acme.id}"):
            access.create_api_key(store.uow(), clock, name="x", rate_limit_rpm=10, creator=bound, **kw)
    assert _key_count(store) == before
    access.create_api_key(store.uow(), clock, name="x", role="customer", rate_limit_rpm=10,
                                customer_id=acme.id, creator=bound)

    now = clock.now()
    session = PanelSession(id="s" * 64, email="ada@example.com", created_at=now, expires_at=now + timedelta(hours=1))

    def as_session(role, customer_id=None):
        user = PanelUser(email="ada@example.com", role=role, customer_id=customer_id, created_at=now, updated_at=now)
        return SessionPrincipal(key=None, permissions=access.ROLES[role], session=session, user=user)

    with pytest.raises(Forbidden, match="services:delete"):
        access.create_api_key(store.uow(), clock, name="x", role="admin", rate_limit_rpm=10,
                                    creator=as_session("viewer"))
    with pytest.raises(Forbidden, match=f"customer {acme.id}"):
        access.create_api_key(store.uow(), clock, name="x", role="customer", rate_limit_rpm=10,
                                    customer_id=other.id, creator=as_session("customer", acme.id))
    # an admin session: any key within the admin role, beyond the session's expiry and 120/min
    access.create_api_key(store.uow(), clock, name="x", role="admin", rate_limit_rpm=5000,
                                creator=as_session("admin"))
