"""Git and AI deploys without an engine: the 422s of ``git_url``, ``git_branch`` and
``ai_url`` (schemes from ``SLIPWAY_GIT_ALLOWED_SCHEMES``), the branch default, the source
fields of the service detail with credentials redacted, start-up checks of the settings,
and a clone failure ending the job ``failed`` with git's words and no credentials."""
from __future__ import annotations

import pytest

from app.config import ConfigError
from core.panel import deploys, customers
from tests.support.api import create_service
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeResolver

#: the deploy times core used to default to (it takes them from the caller now)
DEPLOY_TIMES = DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0)

SECRET = "s3cr3t-t0ken-value"


@pytest.mark.parametrize("body, field, words", [
    ({"deploy_method": "git"}, "git_url", "required"),
    ({"deploy_method": "ai"}, "ai_url", "required"),
    ({"deploy_method": "git", "git_url": ""}, "git_url", ""),
    ({"deploy_method": "git", "git_url": "file:///srv/repo"}, "git_url", "scheme 'file' is not allowed"),
    ({"deploy_method": "git", "git_url": "http://example.org/a.git"}, "git_url", "scheme 'http' is not allowed"),
    ({"deploy_method": "git", "git_url": "ftp://u:pw@example.org/a.git"}, "git_url", "scheme 'ftp' is not allowed"),
    ({"deploy_method": "git", "git_url": "/srv/repo"}, "git_url", "scheme://host/path or user@host:path"),
    ({"deploy_method": "git", "git_url": "ext::sh -c id"}, "git_url", ""),
    ({"deploy_method": "git", "git_url": "https://example.org/a.git", "git_branch": ""}, "git_branch", ""),
    ({"deploy_method": "git", "git_url": "https://example.org/a.git", "git_branch": "--upload-pack=x"},
     "git_branch", "not a valid branch name"),
    ({"deploy_method": "git", "git_url": "https://example.org/a.git", "git_branch": "a..b"}, "git_branch",
     "not a valid branch name"),
    ({"deploy_method": "ai", "ai_url": "file:///srv/repo"}, "ai_url", "scheme 'file' is not allowed"),
    ({"deploy_method": "ai", "ai_url": "svn://example.org/x"}, "ai_url", "scheme 'svn' is not allowed"),
    ({"deploy_method": "ai", "ai_url": ""}, "ai_url", ""),
])
def test_source_refusals_name_the_field(panel, body, field, words):
    make, acme, admin = panel
    client, _ = make()
    result = create_service(client, admin, acme, **body)
    assert result.status_code == 422, result.text
    error = result.json["error"]
    assert error["code"] == "validation_error" and field in error["fields"], error
    assert words in error["fields"][field]
    assert "pw@" not in result.text
    assert client.get("/api/services", token=admin).json["total"] == 0


OPTION_LIKE_URLS = [
    "ssh://-oProxyCommand=touch${IFS}x/repo",
    "ssh://git@-oProxyCommand=x/repo",
    "ssh://-oProxyCommand=x@example.org/repo",
    "-oProxyCommand=x@host:repo",
    "git@-oProxyCommand:repo",
    "git@-oProxyCommand=x:repo",
    "https://-oProxyCommand=x/repo.git",
    "https://-user:pw@example.org/repo.git",
]


@pytest.mark.parametrize("field", ["git_url", "ai_url"])
@pytest.mark.parametrize("url", OPTION_LIKE_URLS)
def test_a_host_or_user_beginning_with_a_dash_is_422_on_create(panel, field, url):
    make, acme, admin = panel
    client, _ = make(SLIPWAY_GIT_ALLOW_PRIVATE="1")  # the rule holds whatever the host rule allows
    method = "git" if field == "git_url" else "ai"
    result = create_service(client, admin, acme, deploy_method=method, **{field: url})
    assert result.status_code == 422, result.text
    error = result.json["error"]
    assert error["code"] == "validation_error" and field in error["fields"], error
    assert "pw@" not in result.text
    assert client.get("/api/services", token=admin).json["total"] == 0


@pytest.mark.parametrize("url", OPTION_LIKE_URLS)
def test_a_host_or_user_beginning_with_a_dash_is_422_on_patch(panel, url):
    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="git", git_url="https://example.org/a.git")
    assert created.status_code == 201, created.text
    sid = created.json["id"]
    before = client.get(f"/api/services/{sid}", token=admin).json
    for field in ("git_url", "ai_url"):
        refused = client.patch(f"/api/services/{sid}", token=admin, json_body={field: url})
        assert refused.status_code == 422, refused.text
        error = refused.json["error"]
        # the source URL is not changed by PATCH: the refusal names it among the body's fields
        assert error["code"] == "validation_error" and field in str(error["fields"]), error
    assert client.get(f"/api/services/{sid}", token=admin).json == before


def test_allowed_schemes_come_from_the_setting(panel):
    make, acme, admin = panel
    client, _ = make(SLIPWAY_GIT_ALLOWED_SCHEMES="file", SLIPWAY_GIT_ALLOW_PRIVATE="1")
    refused = create_service(client, admin, acme, deploy_method="git", git_url="https://example.org/a.git")
    assert refused.status_code == 422 and "allowed: file" in refused.json["error"]["fields"]["git_url"]
    created = create_service(client, admin, acme, deploy_method="git", git_url="file:///srv/repo.git")
    assert created.status_code == 201, created.text
    ai = create_service(client, admin, acme, name="ai", deploy_method="ai", ai_url="file:///srv/site.git")
    assert ai.status_code == 201, ai.text


PRIVATE_SOURCES = [
    ("https://127.0.0.1/acme/site.git", "127.0.0.1 is a loopback address"),
    ("https://10.1.2.3/acme/site.git", "10.1.2.3 is a private address"),
    ("https://192.168.0.10/site.git", "a private address"),
    ("https://172.16.5.4/site.git", "a private address"),
    ("https://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address"),
    ("https://[::1]/site.git", "::1 is a loopback address"),
    ("https://[fd00::1]/site.git", "a private address"),
    ("https://[fe80::1]/site.git", "a link-local address"),
    ("https://[::ffff:127.0.0.1]/site.git", "a loopback address"),
    ("https://[::ffff:a9fe:a9fe]/site.git", "a link-local address"),
    ("https://0.0.0.0/site.git", "an unspecified address"),
    ("https://[::]/site.git", "an unspecified address"),
    ("https://0x7f000001/site.git", "0x7f000001 resolves to 127.0.0.1, which is a loopback address"),
    ("https://2130706433/site.git", "resolves to 127.0.0.1"),
    ("https://0177.0.0.1/site.git", "resolves to 127.0.0.1"),
    ("https://127.1/site.git", "resolves to 127.0.0.1"),
    ("https://localhost/site.git", "localhost resolves to 127.0.0.1, which is a loopback address"),
    ("https://deploy:pw@localhost:8443/site.git", "a loopback address"),
    ("ssh://git@10.0.0.7/site.git", "a private address"),
    ("git@127.0.0.1:acme/site.git", "a loopback address"),
    ("git@localhost:acme/site.git", "a loopback address"),
    ("file:///etc", "file:// URLs read the server's own files"),
]


@pytest.mark.parametrize("field", ["git_url", "ai_url"])
@pytest.mark.parametrize("url, words", PRIVATE_SOURCES)
def test_private_source_hosts_are_refused(panel, field, url, words):
    make, acme, admin = panel
    client, _ = make(SLIPWAY_GIT_ALLOWED_SCHEMES="https,ssh,file")
    method = "git" if field == "git_url" else "ai"
    result = create_service(client, admin, acme, deploy_method=method, **{field: url})
    assert result.status_code == 422, result.text
    error = result.json["error"]
    assert error["code"] == "validation_error" and words in error["fields"][field], error
    assert "pw@" not in result.text
    assert client.get("/api/services", token=admin).json["total"] == 0


def test_private_hosts_are_allowed_by_the_setting_and_unresolvable_names_are_accepted(panel):
    make, acme, admin = panel
    client, _ = make()
    unknown = create_service(client, admin, acme, deploy_method="git", git_url="https://no-such-host.invalid/a.git")
    assert unknown.status_code == 201, unknown.text  # its clone checks again (and fails)
    client, _ = make(SLIPWAY_GIT_ALLOW_PRIVATE="1", SLIPWAY_GIT_ALLOWED_SCHEMES="https,file")
    for index, url in enumerate(("https://127.0.0.1/a.git", "https://10.1.2.3/a.git", "file:///srv/a.git")):
        created = create_service(client, admin, acme, name=f"private-{index}", deploy_method="git", git_url=url)
        assert created.status_code == 201, created.text


def test_scp_like_urls_count_as_ssh_and_the_branch_defaults_to_the_remote_head(panel):
    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="git", git_url="git@github.com:acme/site.git")
    assert created.status_code == 201, created.text
    detail = client.get(f"/api/services/{created.json['id']}", token=admin, expect=200).json
    assert detail["git_url"] == "git@github.com:acme/site.git" and detail["git_branch"] is None
    assert detail["commit"] is None and detail["ai_url"] is None and detail["compose"] == ""
    branch = create_service(client, admin, acme, name="c", deploy_method="git", git_url="ssh://git@host/x.git",
                     git_branch="release/1.2")
    assert client.get(f"/api/services/{branch.json['id']}", token=admin).json["git_branch"] == "release/1.2"


def test_credentials_in_urls_are_never_shown(panel):
    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="git",
                      git_url=f"https://deploy:{SECRET}@git.example.org/acme/site.git", git_branch="main")
    assert created.status_code == 201 and SECRET not in created.text
    detail = client.get(f"/api/services/{created.json['id']}", token=admin, expect=200)
    assert detail.json["git_url"] == "https://***@git.example.org/acme/site.git" and SECRET not in detail.text
    ai = create_service(client, admin, acme, name="ai", deploy_method="ai", ai_url=f"https://{SECRET}@git.example.org/x")
    detail = client.get(f"/api/services/{ai.json['id']}", token=admin, expect=200)
    assert detail.json["ai_url"] == "https://***@git.example.org/x" and SECRET not in detail.text
    for path in ("/api/services", f"/api/services/{ai.json['id']}/events"):
        assert SECRET not in client.get(path, token=admin, expect=200).text


def test_template_services_have_no_source(panel):
    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="template", template_id="static-site")
    detail = client.get(f"/api/services/{created.json['id']}", token=admin, expect=200).json
    assert (detail["git_url"], detail["git_branch"], detail["ai_url"], detail["commit"]) == (None, None, None, None)


@pytest.mark.parametrize("settings, words", [
    ({"SLIPWAY_GIT_ALLOWED_SCHEMES": "https,ftp"}, "SLIPWAY_GIT_ALLOWED_SCHEMES"),
    ({"SLIPWAY_GIT_TIMEOUT": "soon"}, "SLIPWAY_GIT_TIMEOUT"),
    ({"SLIPWAY_GIT_ALLOW_PRIVATE": "yes"}, "SLIPWAY_GIT_ALLOW_PRIVATE"),
    ({"SLIPWAY_SOURCE_MAX_MB": "0"}, "SLIPWAY_SOURCE_MAX_MB"),
    ({"SLIPWAY_SOURCE_MAX_MB": "1.5"}, "SLIPWAY_SOURCE_MAX_MB"),
    ({"SLIPWAY_BUILD_TIMEOUT": "soon"}, "SLIPWAY_BUILD_TIMEOUT"),
    ({"SLIPWAY_BUILD_TIMEOUT": "-5"}, "SLIPWAY_BUILD_TIMEOUT"),
    ({"SLIPWAY_AI_ANALYZER": "oracle"}, "SLIPWAY_AI_ANALYZER"),
    ({"SLIPWAY_AI_ANALYZER": "llm"}, "SLIPWAY_AI_ENDPOINT is required"),
    ({"SLIPWAY_AI_ANALYZER": "llm", "SLIPWAY_AI_ENDPOINT": "http://127.0.0.1:9/v1"}, "SLIPWAY_AI_MODEL is required"),
])
def test_bad_settings_stop_start_up(make_app, settings, words):
    with pytest.raises(ConfigError, match=words):
        make_app(settings=settings)


def test_a_failed_clone_ends_the_job_failed_with_gits_words_and_no_credentials(panel, store, clock, tmp_path):
    """The deploy job itself (no engine is reached: the clone fails first)."""
    import socket

    make, acme, admin = panel
    client, app = make(SLIPWAY_GIT_ALLOWED_SCHEMES="https,file", SLIPWAY_GIT_ALLOW_PRIVATE="1")
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    created = create_service(client, admin, acme, deploy_method="git",
                      git_url=f"https://deploy:{SECRET}@127.0.0.1:{port}/acme/site.git").json
    missing = create_service(client, admin, acme, name="missing", deploy_method="git",
                      git_url=f"file://{tmp_path}/no-such-repo", git_branch="main").json
    deployer = app.parts.deployer
    for _ in range(2):
        job = deploys.claim_next(store.uow(), clock)
        work = tmp_path / job.id
        work.mkdir()
        run_job(store.uow(), Deployer(clock, None, DEPLOY_TIMES, methods=deployer.methods, resolver=FakeResolver()), job, workdir=str(work))
    for service, words in ((created, f"127.0.0.1 port {port}"), (missing, "does not appear to be a git repository")):
        detail = client.get(f"/api/services/{service['id']}", token=admin, expect=200)
        assert detail.json["status"] == "failed" and SECRET not in detail.text
        events = client.get(f"/api/services/{service['id']}/events", token=admin, expect=200)
        failed = [e["message"] for e in events.json["data"] if e["status"] == "failed"]
        assert failed and "deploy failed: cloning" in failed[0] and words in failed[0], failed
        assert SECRET not in events.text
    assert "https://***@127.0.0.1" in failed_message(client, admin, created["id"])
    with store.uow() as uow:
        assert uow.deploy_jobs.get(created["deploy_job_id"]).state == "failed"
        assert SECRET not in (uow.deploy_jobs.get(created["deploy_job_id"]).error or "")


def failed_message(client, admin, service_id):
    events = client.get(f"/api/services/{service_id}/events", token=admin).json["data"]
    return next(e["message"] for e in events if e["status"] == "failed")


def test_migration_9_adds_the_source_columns_to_an_older_service_table(store, clock):
    """A database from before migration 9 (its service table without the columns) gets
    them, and its services read back; running the migrations again changes nothing."""
    columns = ("git_url", "git_branch", "ai_url", "source_commit")
    customer = customers.create_customer(store.uow(), clock, name="Old")
    with store.db.connection_context():
        store.db.execute_sql("INSERT INTO service (id, name, customer_id, deploy_method, status, compose, variables, "
                             "url, created_at, updated_at, health_status, health_failures) VALUES ('svc_old', 'old', "
                             f"'{customer.id}', 'compose', 'stopped', '', '{{}}', '', '2026-01-01 00:00:00+00:00', "
                             "'2026-01-01 00:00:00+00:00', 'unknown', 0)")
        have = {c.name for c in store.db.get_columns("service")}  # migration 37 dropped the first three
        for column in columns:
            if column in have:
                store.db.execute_sql(f"ALTER TABLE service DROP COLUMN {column}")
        store.models.SchemaVersion.delete().where(store.models.SchemaVersion.version == 9).execute()
        assert not set(columns) & {c.name for c in store.db.get_columns("service")}
    assert store.migrate() == [9]
    with store.db.connection_context():
        assert set(columns) <= {c.name for c in store.db.get_columns("service")}
    with store.uow() as uow:
        old = uow.services.get("svc_old")
    # git_url, git_branch and ai_url are kept in Service.source since migration 37
    assert old.name == "old" and (old.source, old.commit) == ({}, None)
    assert store.migrate() == []


def test_a_plugin_adds_an_analyzer_through_register_analyzers(make_app):
    from app.pluginmanager import PluginError
    from plugins.analyzer_heuristic import HeuristicFactory
    from ports import hookimpl
    from ports.analyzer import Analysis, Analyzer, AnalyzerFactory

    class Fixed(Analyzer):
        name = "fixed"

        def analyze(self, source_dir, settings):
            return Analysis("services:\n  app:\n    image: localhost/busybox:latest\n", "always the same")

    class FixedFactory(AnalyzerFactory):
        name = "fixed"

        def create(self, settings):
            return Fixed()

    class Plugin:
        @hookimpl
        def register_analyzers(self):
            return [FixedFactory()]

    app = make_app(plugins=(Plugin(),), settings={"SLIPWAY_AI_ANALYZER": "fixed"})
    assert app.parts.deployer.methods["ai"].analyzer.name == "fixed"

    class Clash:
        @hookimpl
        def register_analyzers(self):
            return [HeuristicFactory()]

    with pytest.raises(PluginError, match="two plugins provide source analyzer 'heuristic'"):
        make_app(plugins=(Clash(),))
