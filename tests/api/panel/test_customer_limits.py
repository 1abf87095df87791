"""Customer limits (docs/decisions.md "Tenant safety"): a panel customer's ``limits``
``{services, memory_mb, cpus, containers}``, null for the operator's default; a create or redeploy
that would take the customer past one is 409 naming it and changes nothing."""
from __future__ import annotations

from dataclasses import replace

import pytest

from app.config import Config, ConfigError
from core.panel import access

ONE = "services:\n  a: {image: x}\n"  # one component: counts the container defaults


def _compose(*components: dict) -> str:
    lines = ["services:"]
    for i, extra in enumerate(components):
        lines.append(f"  c{i}:")
        lines.append("    image: x")
        lines.extend(f"    {k}: {v}" for k, v in extra.items())
    return "\n".join(lines) + "\n"


@pytest.fixture
def admin(store, clock):
    return access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)[1]


def _customer(client, admin, **limits) -> dict:
    body = {"name": "Acme"} | ({"limits": limits} if limits else {})
    return client.post("/api/customers", token=admin, json_body=body, expect=201).json


def _create(client, token, customer, name, compose=ONE, **extra):
    return client.post("/api/services", token=token, json_body={
        "name": name, "customer_id": customer["id"], "deploy_method": "compose", "compose": compose, **extra})


def _state(store, customer_id):
    with store.uow(write=False) as uow:
        return uow.panel_customers.usage(customer_id), uow.services.count_for_customer(customer_id)


def _refused(result, limit: str):
    assert result.status_code == 409, result.text
    assert result.json["error"]["code"] == "conflict" and limit in result.json["error"]["message"], result.json


def test_limits_are_stored_shown_merged_and_reset(client, admin):
    plain = _customer(client, admin)
    assert plain["limits"] == {"services": None, "memory_mb": None, "cpus": None, "containers": None}
    own = _customer(client, admin, services=3, memory_mb=2048, cpus=1.5, containers=7)
    assert own["limits"] == {"services": 3, "memory_mb": 2048, "cpus": 1.5, "containers": 7}
    assert client.get(f"/api/customers/{own['id']}", token=admin, expect=200).json == own
    patched = client.patch(f"/api/customers/{own['id']}", token=admin, json_body={"limits": {"cpus": 8}},
                           expect=200).json
    assert patched["limits"] == {"services": 3, "memory_mb": 2048, "cpus": 8, "containers": 7}  # others kept
    reset = client.patch(f"/api/customers/{own['id']}", token=admin,
                         json_body={"limits": {"services": None, "containers": None}, "name": "Renamed"},
                         expect=200).json
    assert reset["limits"] == {"services": None, "memory_mb": 2048, "cpus": 8, "containers": None}
    assert reset["name"] == "Renamed"
    listed = client.get("/api/customers", token=admin, expect=200).json["data"]
    assert {c["id"]: c["limits"] for c in listed}[own["id"]] == reset["limits"]


@pytest.mark.parametrize("limits, field", [
    ({"services": -1}, "limits.services"),
    ({"services": 2.5}, "limits.services"),
    ({"services": "3"}, "limits.services"),
    ({"services": True}, "limits.services"),
    ({"services": 10 ** 9}, "limits.services"),
    ({"memory_mb": -512}, "limits.memory_mb"),
    ({"memory_mb": 1e300}, "limits.memory_mb"),
    ({"memory_mb": [1]}, "limits.memory_mb"),
    ({"cpus": -0.5}, "limits.cpus"),
    ({"cpus": 0.0001}, "limits.cpus"),
    ({"cpus": 10 ** 7}, "limits.cpus"),
    ({"cpus": "two"}, "limits.cpus"),
    ({"containers": -1}, "limits.containers"),
    ({"containers": 1.5}, "limits.containers"),
    ({"containers": "5"}, "limits.containers"),
    ({"containers": False}, "limits.containers"),
    ({"containers": 10 ** 6}, "limits.containers"),
    ({"gpus": 1}, "limits"),
])
def test_bad_limits_are_422_on_the_field_and_change_nothing(client, admin, limits, field):
    own = _customer(client, admin, services=3)
    for method, path in (("POST", "/api/customers"), ("PATCH", f"/api/customers/{own['id']}")):
        result = client.request(method, path, token=admin, json_body={"name": "X", "limits": limits})
        assert result.status_code == 422, result.text
        assert result.json["error"]["code"] == "validation_error"
        assert any(k.startswith(field) for k in result.json["error"]["fields"]), result.json
    assert client.get(f"/api/customers/{own['id']}", token=admin, expect=200).json == own
    assert client.get("/api/customers", token=admin, expect=200).json["total"] == 1
    for bad in ("3", [1], None):
        client.patch(f"/api/customers/{own['id']}", token=admin, json_body={"limits": bad}, expect=422)


def test_the_services_limit(client, admin, store, clock):
    acme, other = _customer(client, admin, services=2), _customer(client, admin, services=2)
    for name in ("a1", "a2"):
        assert _create(client, admin, acme, name).status_code == 201
    before = _state(store, acme["id"])
    _refused(_create(client, admin, acme, "a3"), "limits.services")
    assert _state(store, acme["id"]) == before  # nothing stored, no job, no name taken
    with store.uow(write=False) as uow:
        assert uow.services.by_name("a3") is None
    # another customer (created by the same admin key) is not held back by acme
    assert _create(client, admin, other, "a3").status_code == 201
    # a customer key of acme: the same limit
    key = access.create_api_key(store.uow(), clock, name="c", role="customer",
                                      rate_limit_rpm=10000, customer_id=acme["id"])[1]
    _refused(_create(client, key, acme, "a4"), "limits.services")
    # a service gone makes room again (DELETE needs an engine: the row goes as it would)
    one = client.get("/api/services", token=admin, params={"customer_id": acme["id"]}, expect=200).json["data"][0]
    with store.uow() as uow:
        uow.services.delete(one["id"])
        uow.commit()
    assert _create(client, key, acme, "a4").status_code == 201


def test_the_memory_limit_counts_mem_limit_and_the_runtime_default(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(default_memory_mb=256))
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    acme = _customer(client, admin, memory_mb=1024, cpus=100)
    assert _create(client, admin, acme, "big", _compose({"mem_limit": "512m"})).status_code == 201
    assert _create(client, admin, acme, "two", _compose({}, {})).status_code == 201  # 2 x 256 (the default)
    assert _state(store, acme["id"])[0] == (2, 1024, 3000, 3)
    before = _state(store, acme["id"])
    _refused(_create(client, admin, acme, "more", _compose({"mem_limit": "6m"})), "limits.memory_mb")
    assert _state(store, acme["id"]) == before


def test_the_cpu_limit_sums_fractions_exactly(client, admin, store):
    acme = _customer(client, admin, cpus=0.3, memory_mb=100000)
    for name in ("p1", "p2", "p3"):  # 0.1 + 0.1 + 0.1 is 0.3, not 0.30000000000000004
        assert _create(client, admin, acme, name, _compose({"cpus": 0.1})).status_code == 201
    _refused(_create(client, admin, acme, "p4", _compose({"cpus": 0.01})), "limits.cpus")
    other = _customer(client, admin, memory_mb=100000)  # no own cpus limit: the default, 4
    assert _create(client, admin, other, "o1", _compose({}, {}, {"cpus": 2})).status_code == 201  # 1 + 1 + 2
    _refused(_create(client, admin, other, "o2", _compose({"cpus": 0.5})), "limits.cpus")


def test_the_operator_defaults_apply_to_customers_without_their_own(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(customer_max_services=1, customer_max_memory_mb=100000,
                                     customer_max_cpus=100))
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    plain, raised = _customer(client, admin), _customer(client, admin, services=3)
    assert _create(client, admin, plain, "x1").status_code == 201
    _refused(_create(client, admin, plain, "x2"), "limits.services")
    for name in ("y1", "y2", "y3"):
        assert _create(client, admin, raised, name).status_code == 201


def test_the_containers_limit_counts_one_container_per_compose_service(client, admin, store, clock):
    """``mem_limit: 6m`` on every component no longer gives hundreds of containers: the
    containers themselves are counted."""
    acme = _customer(client, admin, containers=4, memory_mb=100000, cpus=1000)
    tiny = {"mem_limit": "6m", "cpus": 0.01}
    assert _create(client, admin, acme, "three", _compose(tiny, tiny, tiny)).status_code == 201
    before = _state(store, acme["id"])
    assert before[0][3] == 3
    _refused(_create(client, admin, acme, "two-more", _compose(tiny, tiny)), "limits.containers")
    assert _state(store, acme["id"]) == before  # nothing stored, no job, no name taken
    with store.uow(write=False) as uow:
        assert uow.services.by_name("two-more") is None
    assert _create(client, admin, acme, "one-more", _compose(tiny)).status_code == 201  # 4 of 4
    key = access.create_api_key(store.uow(), clock, name="c", role="customer",
                                rate_limit_rpm=10000, customer_id=acme["id"])[1]
    _refused(_create(client, key, acme, "no-room", _compose(tiny)), "limits.containers")
    # a redeploy whose kept compose grew past the limit is refused too, and changes nothing
    three = client.get("/api/services", token=admin, params={"search": "three"}, expect=200).json["data"][0]
    _finish(store, three["id"], compose=_compose(tiny, tiny, tiny, tiny))
    _refused(client.post(f"/api/services/{three['id']}/redeploy", token=admin), "limits.containers")
    with store.uow(write=False) as uow:
        assert uow.services.get(three["id"]).containers == 3


def test_the_containers_default_is_the_operator_setting(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(customer_max_containers=2))
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    plain, raised = _customer(client, admin), _customer(client, admin, containers=3)
    _refused(_create(client, admin, plain, "x3", _compose({}, {}, {})), "limits.containers")
    assert _create(client, admin, plain, "x2", _compose({}, {})).status_code == 201
    assert _create(client, admin, raised, "y3", _compose({}, {}, {})).status_code == 201


def test_the_containers_default_is_50(client, admin):
    acme = _customer(client, admin, memory_mb=10 ** 6, cpus=1000)
    assert _create(client, admin, acme, "fifty", _compose(*[{}] * 50)).status_code == 201
    _refused(_create(client, admin, acme, "one-more"), "limits.containers")


def test_git_and_ai_services_count_one_default_component_before_their_build(client, admin, store):
    acme = _customer(client, admin, memory_mb=1024)
    made = client.post("/api/services", token=admin, json_body={
        "name": "from-git", "customer_id": acme["id"], "deploy_method": "git",
        "git_url": "https://example.com/repo.git"}, expect=201).json
    assert _state(store, acme["id"])[0] == (1, 512, 1000, 1)
    client.post("/api/services", token=admin, json_body={
        "name": "from-ai", "customer_id": acme["id"], "deploy_method": "ai",
        "ai_url": "https://example.com/repo.git"}, expect=201)
    assert _state(store, acme["id"])[0] == (2, 1024, 2000, 2)
    result = client.post("/api/services", token=admin, json_body={
        "name": "more", "customer_id": acme["id"], "deploy_method": "git", "git_url": "https://example.com/r.git"})
    _refused(result, "limits.memory_mb")
    assert made["status"] == "deploying"


def _finish(store, service_id, **changes):
    """As if the deploy job had ended (the worker does not run in these tests)."""
    with store.uow() as uow:
        service = uow.services.get(service_id)
        uow.services.update(replace(service, status="running", **changes))
        uow.commit()


def test_redeploy_counts_the_kept_compose_and_refuses_growth_past_a_limit(client, admin, store):
    acme = _customer(client, admin, memory_mb=2048, cpus=100)
    made = client.post("/api/services", token=admin, json_body={
        "name": "from-git", "customer_id": acme["id"], "deploy_method": "git",
        "git_url": "https://example.com/repo.git"}, expect=201).json
    # the build ran three components of 512 MB (the default): 1536 MB, within 2048
    _finish(store, made["id"], compose=_compose({}, {}, {}))
    client.post(f"/api/services/{made['id']}/redeploy", token=admin, expect=200)
    assert _state(store, acme["id"])[0] == (1, 1536, 3000, 3)
    # the next build ran five: 2560 MB would be past 2048
    _finish(store, made["id"], compose=_compose({}, {}, {}, {}, {}))
    _refused(client.post(f"/api/services/{made['id']}/redeploy", token=admin), "limits.memory_mb")
    with store.uow(write=False) as uow:
        service = uow.services.get(made["id"])
    assert (service.status, service.memory_mb) == ("running", 1536)  # unchanged
    events = client.get(f"/api/services/{made['id']}/events", token=admin, expect=200).json
    assert [e["type"] for e in events["data"]].count("redeploy") == 1


def test_lowering_a_limit_below_usage_keeps_the_services_and_refuses_only_growth(client, admin, store):
    acme = _customer(client, admin)
    ids = [_create(client, admin, acme, f"s{i}").json["id"] for i in range(3)]  # 3 x (512 MB, 1 CPU)
    lowered = client.patch(f"/api/customers/{acme['id']}", token=admin,
                           json_body={"limits": {"services": 1, "memory_mb": 512, "cpus": 1}}, expect=200).json
    assert lowered["limits"] == {"services": 1, "memory_mb": 512, "cpus": 1, "containers": None}
    assert _state(store, acme["id"])[1] == 3  # nothing removed
    for limit in ("limits.services",):
        _refused(_create(client, admin, acme, "s9"), limit)
    _finish(store, ids[0])
    client.post(f"/api/services/{ids[0]}/redeploy", token=admin, expect=200)  # the same size: allowed


def test_customer_limit_settings_are_checked_at_start_up():
    for name, bad in (("SLIPWAY_CUSTOMER_MAX_SERVICES", "-1"), ("SLIPWAY_CUSTOMER_MAX_SERVICES", "many"),
                      ("SLIPWAY_CUSTOMER_MAX_MEMORY_MB", "4g"), ("SLIPWAY_CUSTOMER_MAX_CPUS", "-2"),
                      ("SLIPWAY_CUSTOMER_MAX_CPUS", "0.0001"), ("SLIPWAY_DEFAULT_MEMORY_MB", "0"),
                      ("SLIPWAY_DEFAULT_CPUS", "0"), ("SLIPWAY_DEFAULT_CPUS", "nan"),
                      ("SLIPWAY_CUSTOMER_MAX_CONTAINERS", "-1"), ("SLIPWAY_CUSTOMER_MAX_CONTAINERS", "2.5"),
                      ("SLIPWAY_CUSTOMER_MAX_CONTAINERS", "100001")):
        with pytest.raises(ConfigError, match=name):
            Config.from_env({name: bad})
    config = Config.from_env({"SLIPWAY_CUSTOMER_MAX_SERVICES": "0", "SLIPWAY_CUSTOMER_MAX_CPUS": "2.5",
                              "SLIPWAY_DEFAULT_MEMORY_MB": "256", "SLIPWAY_DEFAULT_CPUS": "0.5"})
    assert (config.customer_max_services, config.customer_max_memory_mb, config.customer_max_cpus,
            config.default_memory_mb, config.default_cpus) == (0, 4096, 2.5, 256, 0.5)
    assert Config.from_env({}).customer_max_containers == 50
    assert Config.from_env({"SLIPWAY_CUSTOMER_MAX_CONTAINERS": "7"}).customer_max_containers == 7


def _insert_old_service(store, sid: str, customer_id: str, compose: str) -> None:
    """A service row as an older schema held it (before the migration under test)."""
    store.db.execute_sql(
        "INSERT INTO service (id, name, customer_id, deploy_method, status, compose, variables, url, "
        f"created_at, updated_at, health_status, health_failures) VALUES ('{sid}', '{sid[4:]}', "
        f"'{customer_id}', 'compose', 'stopped', %s, '{{}}', '', '2026-01-01 00:00:00+00:00', "
        "'2026-01-01 00:00:00+00:00', 'unknown', 0)".replace("%s", "'" + compose + "'"))


def test_migration_11_adds_the_columns_and_measures_existing_services(store, clock):
    from core.panel import customers as panel_customers

    customer = panel_customers.create_customer(store.uow(), clock, name="Old")
    with store.db.connection_context():
        for column in ("memory_mb", "millicpus"):
            store.db.execute_sql(f"ALTER TABLE service DROP COLUMN {column}")
        for column in ("max_services", "max_memory_mb", "max_millicpus"):
            store.db.execute_sql(f"ALTER TABLE panel_customer DROP COLUMN {column}")
        for sid, compose in (("svc_two", _compose({"mem_limit": "1g", "cpus": 0.25}, {})), ("svc_none", "")):
            _insert_old_service(store, sid, customer.id, compose)
        store.models.SchemaVersion.delete().where(store.models.SchemaVersion.version == 11).execute()
    assert store.migrate() == [11]
    with store.uow(write=False) as uow:
        two, none = uow.services.get("svc_two"), uow.services.get("svc_none")
        assert uow.panel_customers.get(customer.id).limits == panel_customers.Limits()
    assert (two.memory_mb, two.millicpus) == (1024 + 512, 250 + 1000)
    assert (none.memory_mb, none.millicpus) == (512, 1000)  # no compose yet: one default component
    assert store.migrate() == []


def test_migration_19_adds_the_containers_columns_and_counts_existing_services(store, clock):
    from core.panel import customers as panel_customers

    customer = panel_customers.create_customer(store.uow(), clock, name="Old", limits={"services": 5})
    with store.db.connection_context():
        store.db.execute_sql("ALTER TABLE service DROP COLUMN containers")
        store.db.execute_sql("ALTER TABLE panel_customer DROP COLUMN max_containers")
        for sid, compose in (("svc_three", _compose({}, {"mem_limit": "6m"}, {})), ("svc_none", "")):
            _insert_old_service(store, sid, customer.id, compose)
        store.models.SchemaVersion.delete().where(store.models.SchemaVersion.version == 19).execute()
    assert store.migrate() == [19]
    with store.uow(write=False) as uow:
        three, none = uow.services.get("svc_three"), uow.services.get("svc_none")
        assert uow.panel_customers.get(customer.id).limits == panel_customers.Limits(services=5)
        assert uow.panel_customers.usage(customer.id)[3] == 4
    assert (three.containers, none.containers) == (3, 1)  # no compose yet: one container
    assert store.migrate() == []
