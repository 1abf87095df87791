"""The in-memory unit of work (``tests/support/fakes.py``) answers as the database does: the same
scenarios run on both, with the same expectations. Where they differ, core's unit tests
would pass against a fake that lies; this keeps the fake honest (SQLite here, PostgreSQL
in CI's second run)."""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import peewee
import pytest

from core.panel import deploys, access, customers, routes, services
from core.partner import ledger
from core.partner.customers import Contact, Customer
from core.partner.ledger import LedgerEvent
from core.partner.licenses import License
from core.panel.services import ServiceSummary
from core.panel.customers import Quota
from core.partner.scope import Page
from tests.support.fakes import FakeMethod, FakeUnitOfWork, IntegrityError, caller_of, parse, principal_of

DUPLICATE = (IntegrityError, peewee.IntegrityError)


@pytest.fixture(params=["fake", "database"])
def uow(request):
    if request.param == "fake":
        return FakeUnitOfWork()
    return request.getfixturevalue("store").uow()


def _customer(partner_id, clock, n, **values):
    return Customer(id=f"00000000-0000-4000-8000-{n:012d}", human_id=f"C-{n}", partner_id=partner_id,
                    name=f"c{n}", created_at=clock.now(), **values)


def test_rollback_and_commit(uow, clock):
    root = caller_of(uow, clock, "Root")
    with uow:
        uow.customers.add(_customer(root.partner.id, clock, 1))  # no commit
    with pytest.raises(RuntimeError):
        with uow:
            uow.customers.add(_customer(root.partner.id, clock, 2))
            uow.commit()
            raise RuntimeError("after the commit call, before the end of the block")
    with uow:
        uow.customers.add(_customer(root.partner.id, clock, 3))
        uow.commit()
    with uow:
        assert [c.name for c in uow.customers.list({root.partner.id}, Page())] == ["c3"]


def test_human_ids_and_their_rollback(uow, clock):
    with uow:
        first = uow.human_ids.next("T")
    with uow:
        assert uow.human_ids.next("T") == first == "T-1001"
        assert uow.human_ids.next("T") == "T-1002"
        uow.commit()


def test_uniqueness(uow, clock):
    root = caller_of(uow, clock, "Root")
    with pytest.raises(DUPLICATE):
        with uow:
            uow.customers.add(_customer(root.partner.id, clock, 1))
            uow.customers.add(replace(_customer(root.partner.id, clock, 2), human_id="C-1"))
    now = clock.now()
    first = Contact(id="10000000-0000-4000-8000-000000000001", human_id="P-1", customer_id=_customer(
        root.partner.id, clock, 5).id, created_at=now, updated_at=now, first_name="A", is_primary=True)
    with uow:
        uow.customers.add(_customer(root.partner.id, clock, 5))
        uow.contacts.add(first)
        uow.commit()
    with pytest.raises(DUPLICATE):  # one primary contact per customer
        with uow:
            uow.contacts.add(replace(first, id="10000000-0000-4000-8000-000000000002", human_id="P-2"))


def test_orderings(uow, clock):
    root = caller_of(uow, clock, "Root")
    with uow:
        for n in (3, 1, 2):  # created together: the id breaks the tie, descending
            uow.customers.add(_customer(root.partner.id, clock, n, status="active" if n != 2 else "prospect"))
        clock.advance(1)
        uow.customers.add(_customer(root.partner.id, clock, 4))
        uow.commit()
    with uow:
        assert [c.name for c in uow.customers.list({root.partner.id}, Page())] == ["c4", "c3", "c2", "c1"]
        assert [c.name for c in uow.customers.list({root.partner.id}, Page(limit=2, offset=1),
                                                   status="active")] == ["c3", "c1"]
        uow.customers.delete(_customer(root.partner.id, clock, 3).id, clock.now())
        uow.commit()
    with uow:
        assert [c.name for c in uow.customers.list({root.partner.id}, Page())] == ["c4", "c2", "c1"]
        assert uow.customers.get(_customer(root.partner.id, clock, 3).id) is None


def test_a_page_of_services_and_its_total(uow, clock):
    """The total comes with the page (in one statement on the database): on every page,
    with each filter, and on a page past the end, which has no row to carry it."""
    admin = principal_of(uow, clock)
    a, b = customers.create_customer(uow, clock, name="A"), customers.create_customer(uow, clock, name="B")
    for name, customer in (("web", a), ("worker", a), ("db", a), ("www", b)):
        clock.advance(1)
        services.create_service(uow, clock, admin, {"name": name, "deploy_method": "compose", "customer_id": customer.id},
                                {"compose": FakeMethod()}, {}, Quota(read_compose=parse))

    def page(n, per_page=2, **filters):
        options = {"status": None, "customer_id": None, "sort": None, "order": "asc", "search": None, **filters}
        with uow:
            found, total = uow.services.page(page=n, per_page=per_page, **{**options, "sort": options["sort"] or
                                                                            "created_at"})
        return [s.name for s in found], total

    assert page(1, customer_id=a.id) == (["web", "worker"], 3)
    assert page(2, customer_id=a.id) == (["db"], 3)
    assert page(3, customer_id=a.id) == ([], 3)  # past the end: still the total
    assert page(1) == (["web", "worker"], 4)
    assert page(1, customer_id="nobody") == ([], 0)
    assert page(1, customer_id=a.id, search="w", sort="name", order="desc") == (["worker", "web"], 2)
    assert page(2, per_page=1, status="deploying", search="w") == (["worker"], 3)
    assert page(9, status="running") == ([], 0)


def test_ledger_reads_reach_unattributed_events_through_licenses(uow, clock):
    root = caller_of(uow, clock, "Root")
    from core.partner import contracts

    contract = contracts.create_contract(uow, clock, partner_id=root.partner.id, model="m", currency="EUR",
                                         unit_price_cents=1, known_models={"m"})
    customer = _customer(root.partner.id, clock, 1)
    lic = License(id="20000000-0000-4000-8000-000000000001", human_id="L-1", partner_id=root.partner.id,
                  customer_id=customer.id, contract_id=contract.id, license_service_license_id="s",
                  key_masked="\u2026abcdef", edition="pro", state="active", issued_at=clock.now())
    with uow:
        uow.customers.add(customer)
        uow.licenses.add(lic)
        ledger.record(uow, clock, event="license.issued", license=lic, actor=root.partner.id,
                      data={"contractId": contract.id, "keyMasked": lic.key_masked})
        clock.advance(3600)
        uow.ledger.append(LedgerEvent(id=None, event="license.suspended", at=clock.now(), actor=None,
                                      partner_id=root.partner.id, customer_id=None, license_id=lic.id))
        clock.advance(86400 * 2)
        ledger.record(uow, clock, event="license.resumed", license=lic, actor=root.partner.id)
        uow.commit()
    with uow:
        everything = uow.ledger.for_customer(customer.id, ledger.make_filter(), Page())
        assert [e.event for e in everything] == ["license.resumed", "license.suspended", "license.issued"]
        assert [e.event for e in uow.ledger.for_customer(customer.id, ledger.make_filter(actor=""), Page())] == \
            ["license.suspended"]
        assert [e.event for e in uow.ledger.for_customer_before(customer.id, ledger.make_filter(),
                                                                everything[0].id, 1)] == ["license.suspended"]
        by_event, first, last = uow.ledger.summary_for_customer(customer.id, ledger.make_filter())
        assert by_event == {"license.issued": 1, "license.suspended": 1, "license.resumed": 1}
        assert last - first == timedelta(days=2, hours=1)
        ((history, contract_ids),) = uow.ledger.histories_for_partner(root.partner.id)
        assert contract_ids == {contract.id} and history.key_masked == lic.key_masked
        assert [(c.event, c.on, c.contract) for c in history.changes] == [
            ("license.issued", everything[2].at.date(), contract.id),
            ("license.suspended", everything[1].at.date(), None),
            ("license.resumed", everything[0].at.date(), None)]


def test_deploy_claims_routes_and_panel_deletes(uow, clock):
    admin = principal_of(uow, clock)
    a = customers.create_customer(uow, clock, name="A")
    b = customers.create_customer(uow, clock, name="B")
    jobs = []
    for name, owner in (("a1", a), ("a2", a), ("b1", b)):
        jobs.append(services.create_service(uow, clock, admin, {"name": name, "deploy_method": "compose",
                                                                "customer_id": owner.id},
                                            {"compose": FakeMethod()}, {}, Quota(read_compose=parse))[1])
        clock.advance(1)
    assert deploys.claim_next(uow, clock, owner="w", per_customer=1).id == jobs[0].id
    assert deploys.claim_next(uow, clock, owner="w", per_customer=1).id == jobs[2].id
    assert deploys.claim_next(uow, clock, owner="w", per_customer=1) is None
    assert sorted(deploys.recover_interrupted(uow, clock)) == sorted([jobs[0].id, jobs[2].id])  # "w" holds no lease
    with uow:
        routes.follow(uow, services.Service(jobs[0].service_id, "a1", a.id, "compose", "running", clock.now(),
                                            clock.now()), "http://127.0.0.1:1", "example.test", clock.now())
        routes.follow(uow, services.Service(jobs[2].service_id, "a1", b.id, "compose", "running", clock.now(),
                                            clock.now()), "http://127.0.0.1:2", "example.test", clock.now())
        uow.commit()
    assert [(r.hostname, r.service_id) for r in routes.list_routes(uow)] == [("a1.example.test", jobs[2].service_id)]
    with uow:
        assert uow.panel_customers.usage(a.id)[0] == 2 and uow.services.count_for_customer(b.id) == 1
    key = principal_of(uow, clock, "customer", customer_id=b.id).key
    access.revoke_api_key(uow, clock, key.id)
    services.delete_service(uow, _NoEngine(), admin, jobs[2].service_id)
    customers.delete_customer(uow, b.id)
    with uow:
        assert uow.panel_customers.get(b.id) is None and uow.api_keys.get(key.id) is None
    with pytest.raises(DUPLICATE):  # a customer with services stays
        with uow:
            uow.panel_customers.delete(a.id)


class _NoEngine:
    def remove_service(self, service_id):
        pass


def test_secret_variables_and_the_customer_network_read_back_as_written(uow, clock):
    """The database encrypts secret variables and reads them back in the clear; the fake
    keeps them as they are: a service reads back the same from both."""
    admin = principal_of(uow, clock)
    a = customers.create_customer(uow, clock, name="A")
    _, job = services.create_service(uow, clock, admin, {"name": "db", "deploy_method": "compose",
                                                         "customer_id": a.id, "customer_network": True},
                                     {"compose": FakeMethod()}, {}, Quota(read_compose=parse))
    with uow:
        service = replace(uow.services.get(job.service_id), variables={"P": "s3cret", "D": "app"}, secrets=("P",))
        uow.services.update(service)
        uow.commit()
    with uow:
        again = uow.services.get(job.service_id)
        assert (again.variables, again.secrets, again.customer_network) == ({"P": "s3cret", "D": "app"}, ("P",), True)
        assert uow.services.on_customer_network(a.id) == 1
        # a list page reads summaries: no variables, secret or not, on it
        assert uow.services.page(page=1, per_page=5, status=None, customer_id=a.id, sort=None, order="asc",
                                 search=None)[0] == [ServiceSummary.of(again)]


def test_releases_job_pages_and_cancels(uow, clock):
    from core.panel.releases import Release

    admin = principal_of(uow, clock)
    a = customers.create_customer(uow, clock, name="A")
    created = []
    for name in ("r1", "r2"):
        created.append(services.create_service(uow, clock, admin, {"name": name, "deploy_method": "compose",
                                                                   "customer_id": a.id},
                                               {"compose": FakeMethod()}, {}, Quota(read_compose=parse)))
        clock.advance(1)
    (s1, j1), (s2, j2) = created
    with uow:
        for number in (1, 2, 3):
            uow.releases.add(Release(id=f"rel_{number}", service_id=s1.id, number=number, deploy_job_id=j1.id,
                                     images=({"component": "web", "image": "x", "image_id": "sha256:1"},),
                                     compose="c", variables={"A": "b"}, commit=None, created_at=clock.now()))
        uow.commit()
    with pytest.raises(DUPLICATE):
        with uow:
            uow.releases.add(replace(uow.releases.get("rel_1"), id="rel_again"))
            uow.commit()
    with uow:
        assert uow.releases.last_number(s1.id) == 3 and uow.releases.last_number(s2.id) == 0
        assert [r.number for r in uow.releases.for_service(s1.id)] == [3, 2, 1]
        found, total = uow.releases.page(s1.id, page=2, per_page=2)
        assert ([r.id for r in found], total) == (["rel_1"], 3)
        assert uow.releases.get("rel_2").images[0]["image_id"] == "sha256:1"
        assert uow.releases.get("rel_2").variables == {"A": "b"}
        assert uow.deploy_jobs.cancel_queued(j1.id, clock.now()) is True
        assert uow.deploy_jobs.cancel_queued(j1.id, clock.now()) is False
        assert uow.deploy_jobs.request_cancel(j2.id, clock.now()) is True
        assert uow.deploy_jobs.request_cancel(j1.id, clock.now()) is False  # finished (cancelled)
        assert uow.deploy_jobs.cancels_requested([j1.id, j2.id, "job_nope"]) == {j1.id, j2.id}
        uow.deploy_jobs.finish(j2.id, "succeeded", None, clock.now(), release_id="rel_3")
        assert uow.deploy_jobs.request_cancel(j2.id, clock.now()) is False
        uow.commit()
    with uow:
        cancelled, done = uow.deploy_jobs.get(j1.id), uow.deploy_jobs.get(j2.id)
        assert (cancelled.state, cancelled.error, cancelled.finished_at is not None) == ("cancelled", "cancelled", True)
        assert (done.state, done.release_id, done.cancel_requested, done.created_by) == (
            "succeeded", "rel_3", True, f"key:{admin.key.id}")
        assert [j.id for j in uow.deploy_jobs.page(s1.id, page=1, per_page=5)[0]] == [j1.id]
        uow.releases.delete_for(s1.id)
        uow.commit()
    with uow:
        assert uow.releases.for_service(s1.id) == []


def test_release_ancestry_and_the_commits_of_a_push_deploy(uow, clock):
    from core.panel.releases import Release
    from core.panel.services import DeployJob

    older, old, other = (f"{n:040x}" for n in (1, 2, 3))
    with uow:
        for n, service_id in ((1, "svc_a"), (2, "svc_b")):
            uow.releases.add(Release(id=f"rel_{n}", service_id=service_id, number=1, deploy_job_id=f"job_{n}",
                                     images=(), compose="c", variables={}, commit=other, created_at=clock.now()))
        uow.releases.add_ancestry("rel_1", "svc_a", [old, older, old])
        uow.releases.add_ancestry("rel_2", "svc_b", [older])
        uow.deploy_jobs.add(DeployJob(id="job_p", service_id="svc_a", kind="redeploy", state="queued",
                                      created_at=clock.now(), updated_at=clock.now(), created_by="git:github",
                                      commit=old, commits=(old,)))
        uow.commit()
    with uow:
        assert uow.releases.ancestry("rel_1") == tuple(sorted((old, older)))
        assert uow.releases.has_ancestor("rel_1", older) and not uow.releases.has_ancestor("rel_1", other)
        assert not uow.releases.has_ancestor("rel_nope", older)
        assert uow.deploy_jobs.get("job_p").commits == (old,)
        assert uow.deploy_jobs.retarget("job_p", older, "git:gitlab", clock.now(), commits=(old, older)) is True
        uow.commit()
    with uow:
        job = uow.deploy_jobs.queued_push("svc_a")
        assert (job.commit, job.commits, job.created_by) == (older, (old, older), "git:gitlab")
        uow.releases.delete_for("svc_a")
        uow.commit()
    with uow:
        assert uow.releases.ancestry("rel_1") == () and uow.releases.has_ancestor("rel_2", older)


def test_history_prune_keeps_the_newest_and_every_unfinished_job(uow, clock):
    from core.panel import history
    from core.panel.services import DeployJob, ServiceEvent

    with uow:
        for service_id in ("svc_a", "svc_b"):
            for i in range(4 if service_id == "svc_a" else 2):
                uow.service_events.add(ServiceEvent(None, service_id, "deploy", "started", f"e{i}", clock.now()))
        for i, state in enumerate(["running", "succeeded", "queued", "failed", "succeeded", "cancelled"]):
            at = clock.now() + timedelta(seconds=i)
            uow.deploy_jobs.add(DeployJob(id=f"job_{i}", service_id="svc_a", kind="deploy", state=state,
                                          created_at=at, updated_at=at))
        uow.commit()
    assert history.prune(uow, events_keep=2, jobs_keep=2) == (2, 2)
    with uow:
        assert [e.message for e in uow.service_events.page("svc_a", page=1, per_page=10)[0]] == ["e3", "e2"]
        assert uow.service_events.page("svc_b", page=1, per_page=10)[1] == 2
        jobs, total = uow.deploy_jobs.page("svc_a", page=1, per_page=10)
    assert [j.id for j in jobs] == ["job_5", "job_4", "job_2", "job_0"]
    assert history.prune(uow, events_keep=2, jobs_keep=2) == (0, 0)


def test_a_deletes_end_of_queued_jobs_and_its_look_at_running_ones(uow, clock):
    from core.panel.services import DeployJob

    with uow:
        for i, (service_id, state) in enumerate([("svc_a", "queued"), ("svc_a", "running"), ("svc_a", "queued"),
                                                 ("svc_a", "succeeded"), ("svc_b", "queued"), ("svc_b", "running")]):
            at = clock.now() + timedelta(seconds=i)
            uow.deploy_jobs.add(DeployJob(id=f"job_{i}", service_id=service_id, kind="deploy", state=state,
                                          created_at=at, updated_at=at))
        uow.commit()
    with uow:
        assert sorted(uow.deploy_jobs.fail_queued("svc_a", "service deleted", clock.now())) == ["job_0", "job_2"]
        assert uow.deploy_jobs.fail_queued("svc_a", "service deleted", clock.now()) == []
        uow.commit()
    with uow:
        ended = [uow.deploy_jobs.get(f"job_{i}") for i in (0, 2)]
        assert {(j.state, j.error, j.finished_at is not None) for j in ended} == {("failed", "service deleted", True)}
        assert (uow.deploy_jobs.get("job_3").state, uow.deploy_jobs.get("job_4").state) == ("succeeded", "queued")
        assert uow.deploy_jobs.running_ids("svc_a") == ["job_1"]
        assert uow.deploy_jobs.running_ids("svc_c") == []
        uow.commit()


def test_operation_leases_are_found_by_prefix(uow, clock):
    from datetime import timedelta

    with uow:
        uow.leases.beat("op_svc_a_1", clock.now())
        uow.leases.beat("op_svc_b_2", clock.now() - timedelta(seconds=60))
        uow.leases.beat("OP_svc_c_3", clock.now())  # another case: not the prefix
        uow.leases.beat("wkr_1", clock.now())
        uow.commit()
    with uow.reading():
        assert uow.leases.held("op_", clock.now() - timedelta(seconds=30)) == {"op_svc_a_1"}
        assert uow.leases.held("op_", clock.now() - timedelta(seconds=90)) == {"op_svc_a_1", "op_svc_b_2"}
        assert uow.leases.held("op_svc_a_", clock.now() - timedelta(seconds=30)) == {"op_svc_a_1"}


def test_deploy_keys_read_back_and_go_with_their_customer(uow, clock):
    """The database seals a deploy key's private half and reads it back in the clear; the
    fake keeps it as it is: both answer the same key, page, users and cascade."""
    from core.panel import deploy_keys

    admin = principal_of(uow, clock)
    a = customers.create_customer(uow, clock, name="A")
    b = customers.create_customer(uow, clock, name="B")
    first = deploy_keys.create_key(uow, clock, admin, {"name": "one", "customer_id": a.id})
    clock.advance(1)
    second = deploy_keys.create_key(uow, clock, admin, {"name": "two", "customer_id": b.id})
    keyed = type("Keyed", (FakeMethod,), {"request_schema": {"properties": {"deploy_key_id": {}}}})()
    services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose", "customer_id": a.id,
                                                "deploy_key_id": first.id}, {"compose": keyed}, {},
                            Quota(read_compose=parse))
    with uow:
        assert uow.deploy_keys.get(first.id) == first
        assert uow.deploy_keys.private_key(first.id).text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
        assert uow.deploy_keys.private_key("dk_missing") is None and uow.deploy_keys.get("dk_missing") is None
        assert uow.deploy_keys.page(page=1, per_page=5, customer_id=None) == ([first, second], 2)
        assert uow.deploy_keys.page(page=2, per_page=1, customer_id=None) == ([second], 2)
        assert uow.deploy_keys.page(page=1, per_page=5, customer_id=b.id) == ([second], 1)
        [user] = uow.deploy_keys.users(first.id)
        assert user.endswith(" (web)") and uow.deploy_keys.users(second.id) == []
    customers.delete_customer(uow, b.id)  # its keys go with it
    with uow:
        assert uow.deploy_keys.get(second.id) is None


def test_backup_claims_one_job_per_customer_at_a_time(uow, clock):
    """With ``per_customer`` a customer with a backup, restore or verification running
    gets nothing more claimed; another customer's job is claimed past it."""
    from core.panel import backups

    admin = principal_of(uow, clock)
    a = customers.create_customer(uow, clock, name="A")
    b = customers.create_customer(uow, clock, name="B")
    made = {}
    for name, owner in (("a1", a), ("a2", a), ("b1", b)):
        service = services.create_service(uow, clock, admin, {"name": name, "deploy_method": "compose",
                                                              "customer_id": owner.id},
                                          {"compose": FakeMethod()}, {}, Quota(read_compose=parse))[0]
        backup = backups.Backup(id=f"bkp_{name}", service_id=service.id, status="pending", created_at=clock.now(),
                                updated_at=clock.now())
        with uow:
            uow.backups.add(backup)
            uow.commit()
        made[name] = backup
        clock.advance(1)
    claim = lambda: backups.claim_next(uow, clock, owner="w", per_customer=True)  # noqa: E731
    assert claim()[1].id == "bkp_a1"
    assert claim()[1].id == "bkp_b1"  # a2 waits for a1: same customer
    assert claim() is None
    with uow:  # a1 ends, and a restore from it runs: A still has a job running
        uow.backups.update(replace(made["a1"], status="completed", restore_status="running"))
        uow.commit()
    assert claim() is None
    with uow:
        uow.backups.update(replace(made["a1"], status="completed", restore_status="completed"))
        uow.commit()
    assert claim()[1].id == "bkp_a2"
    assert backups.claim_next(uow, clock, owner="w") is None  # nothing queued at all
