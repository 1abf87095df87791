"""Core's rules follow what a deploy method says it is (``DeployMethod.source_fields``,
``fetches_source``, ``deploys_on_push``, ``previews``; ``core.panel.capabilities``), never
its name: a method of a plugin core has never heard of keeps its own fields across create
and PATCH, and pushes, previews, ``auto_deploy`` and the pinned host key follow the flags
whatever the methods are called (here a pushing method is named ``compose`` and a plain
one ``git``, to show no name decides)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.errors import Conflict, Invalid, NotFound
from core.panel import capabilities, previews, pushes, services
from core.panel.compose.plan import DeployPlan
from core.panel.customers import Quota
from ports.git_providers import GitEvent, PullRequest, Push
from tests.support.fakes import compose_of, parse

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)


class ImageMethod:
    """A third party's method that keeps fields of its own (``image``, required: its
    source; ``port``, optional) and does nothing else."""

    request_schema = {"required": ["image"],
                      "properties": {"image": {"type": "string"}, "port": {"type": "integer"},
                                     "variables": {"type": "object"}}}
    source_fields = ("image", "port")

    def __init__(self, name: str):
        self.name = name

    def plan(self, request, catalog):
        if not str(request["image"]).strip():
            raise Invalid("invalid image", fields={"image": "empty"})
        return parse(compose_of(), {})


class MirrorMethod:
    """A method that fetches its source from a repository (``repo_url``) at a branch,
    deploys on push and has previews: what git is, under any name."""

    request_schema = {"required": ["repo_url"],
                      "properties": {"repo_url": {"type": "string"}, "git_branch": {"type": "string"},
                                     "variables": {"type": "object"}}}
    source_fields = ("repo_url", "git_branch")
    fetches_source = deploys_on_push = previews = True

    def __init__(self, name: str):
        self.name = name

    def plan(self, request, catalog):
        branch = request.get("git_branch")
        return DeployPlan(compose="", components=(), variables=dict(request.get("variables") or {}),
                          source={"repo_url": request["repo_url"], "git_branch": branch.strip() if branch else None})


@pytest.fixture
def methods():
    # the names are the built-in methods' the other way round: only what they say decides
    return {"git": ImageMethod("git"), "compose": MirrorMethod("compose")}


def _create(uow, clock, admin, customer, methods, **request):
    return services.create_service(uow, clock, admin, {"customer_id": customer.id, **request}, methods, {}, QUOTA)


def test_the_capabilities_are_read_from_the_method():
    image, mirror = ImageMethod("image"), MirrorMethod("mirror")
    assert capabilities.created_fields(image) == ("image", "port")
    assert capabilities.patched_fields(image) == ("port",)  # the required field names the source: it stays
    assert capabilities.repository_field(mirror) == "repo_url"
    assert capabilities.patched_fields(mirror) == ("git_branch",)
    assert (capabilities.deploys_on_push(image), capabilities.has_previews(image),
            capabilities.fetches_source(image)) == (False, False, False)
    assert (capabilities.deploys_on_push(mirror), capabilities.has_previews(mirror),
            capabilities.fetches_source(mirror)) == (True, True, True)
    both = {"image": image, "mirror": mirror}
    assert capabilities.all_source_fields(both) == ("image", "port", "repo_url", "git_branch")
    assert capabilities.those_that(both, capabilities.deploys_on_push) == "mirror"
    assert capabilities.runs_compose(both) is None


def test_a_methods_own_fields_are_kept_across_create_and_patch(uow, clock, admin, customer, methods):
    service, _ = _create(uow, clock, admin, customer, methods, name="shop", deploy_method="git",
                         image="registry.example.test/shop:1", port=8080)
    assert service.source == {"image": "registry.example.test/shop:1", "port": 8080}
    with uow:
        assert uow.services.get(service.id).source == service.source
        uow.services.update(replace(uow.services.get(service.id), status="running"))
        uow.commit()

    patched = services.patch_service(uow, clock, admin, service.id, {"port": 9090}, methods, {})
    assert patched.source == {"image": "registry.example.test/shop:1", "port": 9090}
    with pytest.raises(Invalid) as refused:  # the field its create requires names the source: kept
        services.patch_service(uow, clock, admin, service.id, {"image": "other:2"}, methods, {})
    assert list(refused.value.fields) == ["image"]
    with uow:
        assert uow.services.get(service.id).source == {"image": "registry.example.test/shop:1", "port": 9090}


def test_a_field_left_out_is_not_kept(uow, clock, admin, customer, methods):
    service, _ = _create(uow, clock, admin, customer, methods, name="bare", deploy_method="git", image="nginx")
    assert service.source == {"image": "nginx"}
    mirrored, _ = _create(uow, clock, admin, customer, methods, name="site", deploy_method="compose",
                          repo_url="https://example.test/site.git")
    assert mirrored.source == {"repo_url": "https://example.test/site.git"}  # no branch: the default one


def test_the_branch_a_patch_gives_is_kept_as_the_plan_reads_it(uow, clock, admin, customer, methods):
    service, _ = _create(uow, clock, admin, customer, methods, name="site", deploy_method="compose",
                         repo_url="https://example.test/site.git", git_branch="main")
    with uow:
        uow.services.update(replace(uow.services.get(service.id), status="running"))
        uow.commit()
    patched = services.patch_service(uow, clock, admin, service.id, {"git_branch": " next "}, methods, {})
    assert patched.source == {"repo_url": "https://example.test/site.git", "git_branch": "next"}


def test_auto_deploy_previews_and_the_host_key_follow_the_flags(uow, clock, admin, customer, methods):
    for body in ({"auto_deploy": False}, {"previews": True}, {"previews_from_forks": True}):
        with pytest.raises(Invalid) as refused:
            _create(uow, clock, admin, customer, methods, name="plain", deploy_method="git", image="nginx", **body)
        assert list(refused.value.fields) == list(body)
    made, _ = _create(uow, clock, admin, customer, methods, name="mirror", deploy_method="compose",
                      repo_url="https://example.test/site.git", auto_deploy=False, previews=True)
    assert (made.auto_deploy, made.previews) == (False, True)

    plain, _ = _create(uow, clock, admin, customer, methods, name="plain", deploy_method="git", image="nginx")
    with uow:
        for service_id in (plain.id, made.id):
            uow.services.update(replace(uow.services.get(service_id), status="running"))
        uow.commit()
    for body in ({"auto_deploy": True}, {"ssh_host_key": None}, {"previews": True}):
        with pytest.raises(Invalid) as refused:
            services.patch_service(uow, clock, admin, plain.id, body, methods, {})
        assert list(refused.value.fields) == list(body)
        assert services.patch_service(uow, clock, admin, made.id, body, methods, {}).id == made.id


def test_pushes_follow_deploys_on_push(uow, clock, admin, customer, methods):
    plain, _ = _create(uow, clock, admin, customer, methods, name="plain", deploy_method="git", image="nginx")
    made, _ = _create(uow, clock, admin, customer, methods, name="mirror", deploy_method="compose",
                      repo_url="https://example.test/site.git", git_branch="main")
    with pytest.raises(Conflict):
        pushes.new_webhook_secret(uow, clock, admin, plain.id, methods=methods)
    assert pushes.webhook_secret(uow, plain.id, methods=methods) is None
    event = GitEvent(provider="github", kind="push", name="push", push=Push(branch="main", commit="c" * 40))
    with pytest.raises(NotFound):
        pushes.receive(uow, clock, plain.id, "github", "d1", event, methods=methods, quota=QUOTA)

    secret = pushes.new_webhook_secret(uow, clock, admin, made.id, methods=methods)
    assert pushes.webhook_secret(uow, made.id, methods=methods) == secret
    assert pushes.webhook_secret(uow, made.id, methods={}) is None  # its method not loaded: no hook
    with uow:
        uow.services.update(replace(uow.services.get(made.id), status="running"))
        uow.commit()
    other = GitEvent(provider="github", kind="push", name="push", push=Push(branch="other", commit="c" * 40))
    assert pushes.receive(uow, clock, made.id, "github", "d2", other, methods=methods,
                          quota=QUOTA).body == {"ignored": "branch"}  # its source's git_branch is tracked
    queued = pushes.receive(uow, clock, made.id, "github", "d3", event, methods=methods, quota=QUOTA)
    assert queued.status == 202 and "deploy_job_id" in queued.body


def test_a_preview_deploys_the_forks_repository_into_the_methods_repository_field(uow, clock, admin, customer,
                                                                                   methods):
    parent, _ = _create(uow, clock, admin, customer, methods, name="site", deploy_method="compose",
                        repo_url="https://example.test/site.git", git_branch="main", previews=True,
                        previews_from_forks=True)
    with uow:
        uow.services.update(replace(uow.services.get(parent.id), status="running"))
        uow.commit()
    fork = PullRequest(number=7, action="opened", base_branch="main", head_branch="feature", head_commit="d" * 40,
                       from_fork=True, head_clone_url="https://example.test/fork/site.git")
    answer = previews.on_pull_request(uow, clock, parent.id, fork, methods=methods, quota=QUOTA)
    with uow:
        preview = uow.services.get(answer["preview_id"])
    assert preview.source == {"repo_url": "https://example.test/fork/site.git", "git_branch": "feature"}
    assert (preview.preview_of, preview.preview_number) == (parent.id, 7)

    against = PullRequest(number=8, action="opened", base_branch="other", head_branch="x", head_commit="e" * 40,
                          from_fork=False)
    assert previews.on_pull_request(uow, clock, parent.id, against, methods=methods,
                                    quota=QUOTA) == {"ignored": "branch"}


def test_a_parent_whose_method_has_no_previews_gets_none(uow, clock, admin, customer, methods):
    parent, _ = _create(uow, clock, admin, customer, methods, name="site", deploy_method="compose",
                        repo_url="https://example.test/site.git", previews=True)
    request = PullRequest(number=1, action="opened", base_branch="main", head_branch="f", head_commit="f" * 40,
                          from_fork=False)
    without = {"compose": ImageMethod("compose"), "git": methods["git"]}  # the same name, no previews now
    assert previews.on_pull_request(uow, clock, parent.id, request, methods=without,
                                    quota=QUOTA) == {"ignored": "previews"}
