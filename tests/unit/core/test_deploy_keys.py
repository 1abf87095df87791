"""Deploy keys in core (core.panel.deploy_keys) with the in-memory unit of work: the
fingerprint, the key a service may name, and the deploy job handing the private half to
its method's source step (and to no other job)."""
from __future__ import annotations

import base64
import hashlib

import pytest

from core.errors import Conflict, Invalid
from core.panel import customers, deploy_keys, services
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeResolver, FakeMethod

#: the deploy times core used to default to (it takes them from the caller now)
DEPLOY_TIMES = DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0)


class KeyedMethod(FakeMethod):
    """A method with a repository: it takes ``deploy_key_id`` and records the key its
    source step is handed (then runs the compose kept on the service)."""

    request_schema = {"properties": {"deploy_key_id": {"type": ["string", "null"]}}}

    def __init__(self):
        self.handed = []

    def prepare(self, service, runtime, workdir, progress, cancel=None, deploy_key=None):
        self.handed.append(deploy_key)


@pytest.fixture
def keyed():
    return KeyedMethod()


def _service(uow, clock, admin, customer, keyed, name="web", **body):
    return services.create_service(uow, clock, admin, {"name": name, "deploy_method": "compose",
                                                       "customer_id": customer.id, **body}, {"compose": keyed}, {})


def test_the_fingerprint_is_ssh_keygens(uow, clock, admin, customer):
    key = deploy_keys.create_key(uow, clock, admin, {"name": "k", "customer_id": customer.id})
    blob = base64.b64decode(key.public_key.split()[1])
    assert key.fingerprint == "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    with uow:
        private = uow.deploy_keys.private_key(key.id)
    assert private.text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and private.text not in repr(private)


def test_the_job_hands_the_key_to_its_own_services_source_step_only(uow, clock, admin, customer, keyed, runtime,
                                                                    tmp_path):
    key = deploy_keys.create_key(uow, clock, admin, {"name": "k", "customer_id": customer.id})
    _, job = _service(uow, clock, admin, customer, keyed, deploy_key_id=key.id)
    deployer = Deployer(clock, runtime, DEPLOY_TIMES, methods={"compose": keyed}, resolver=FakeResolver())
    run_job(uow, deployer, job, workdir=str(tmp_path))
    _, plain = _service(uow, clock, admin, customer, keyed, name="plain")
    run_job(uow, deployer, plain, workdir=str(tmp_path))
    assert [k.key_id if k else None for k in keyed.handed] == [key.id, None]
    with uow:
        assert uow.deploy_jobs.get(job.id).state == "succeeded"


def test_a_key_of_another_customer_is_refused_and_one_in_use_stays(uow, clock, admin, customer, keyed):
    other = customers.create_customer(uow, clock, name="Other")
    theirs = deploy_keys.create_key(uow, clock, admin, {"name": "k", "customer_id": other.id})
    with pytest.raises(Invalid) as refused:
        _service(uow, clock, admin, customer, keyed, deploy_key_id=theirs.id)
    assert "deploy_key_id" in refused.value.fields
    mine = deploy_keys.create_key(uow, clock, admin, {"name": "k", "customer_id": customer.id})
    service, _ = _service(uow, clock, admin, customer, keyed, deploy_key_id=mine.id)
    with pytest.raises(Conflict, match=service.id):
        deploy_keys.delete_key(uow, admin, mine.id)
    deploy_keys.delete_key(uow, admin, theirs.id)
    with uow:
        assert uow.deploy_keys.get(theirs.id) is None and uow.deploy_keys.get(mine.id) is not None
