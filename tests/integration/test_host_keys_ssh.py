"""SSH host keys pinned per service (``core.panel.host_keys``) against a real ``sshd``
(tests/support/sshd.py) serving a private bare repository over ssh:

- the clone itself (``source.clone``): without a pin it accepts the first key and
  ``host_key_seen`` reads it back (the fingerprint ``ssh-keygen -l`` prints); with the
  pin it connects with ``StrictHostKeyChecking=yes`` and a known-hosts file holding that
  key alone; once the server shows another key the clone fails with ``host key
  changed``; a server that answers for github.com is checked against github's published
  keys from the first clone and refused;
- through a real uvicorn server and a real engine (Podman): the first deploy pins the
  key and the detail shows it; after the server's key changed a redeploy fails with
  ``host key changed`` and the service keeps serving its release; ``PATCH ssh_host_key:
  null`` then a redeploy pins the new key; any other value is 422.
"""
from __future__ import annotations

import os
import time

import pytest

from core.panel.deploy_keys import new_key_pair
from core.panel.host_keys import shown
from plugins.source_common import host_keys, hosts, source
from tests.integration.test_deploy_keys_ssh import private_repository
from tests.support.git_repos import CONTAINERFILE, _create
from tests.support.panel_server import _get, _until
from tests.support.sshd import running_sshd

pytestmark = pytest.mark.runtime


@pytest.fixture
def sshd(tmp_path):
    with running_sshd(tmp_path) as running:
        yield running


def _clone(sshd, url, work, name, identity, **more):
    return source.clone(url, None, str(work / name), allowed=("ssh",), allow_private=True, identity=identity,
                        workdir=str(work), **more)


def test_the_first_clone_learns_the_key_and_a_later_one_is_refused_another(sshd, tmp_path):
    bare, commit = private_repository(tmp_path, {"index.html": "hello\n"})
    public, private = new_key_pair("test")
    sshd.authorize(public)
    url, work = sshd.url(bare), tmp_path / "job"
    work.mkdir(mode=0o700)

    assert _clone(sshd, url, work, "first", private)[0] == commit
    learned = source.host_key_seen(str(work))
    assert shown(learned) == sshd.fingerprint()  # the key the server showed, as ssh-keygen -l prints it

    assert _clone(sshd, url, work, "pinned", private, host_key=learned)[0] == commit
    assert (work / host_keys.FILE).read_text() == f"127.0.0.1 {learned}\n"  # that key alone, nothing learned

    old = sshd.fingerprint()
    sshd.new_host_key()
    assert sshd.fingerprint() != old
    with pytest.raises(source.SourceError, match="host key changed") as refused:
        _clone(sshd, url, work, "changed", private, host_key=learned)
    assert old in str(refused.value) and "PATCH ssh_host_key to null" in str(refused.value)
    assert not (work / "changed" / "index.html").exists()
    assert source.host_key_seen(str(work)) == learned  # the refused key was written nowhere

    assert _clone(sshd, url, work, "forgotten", private)[0] == commit  # no pin: the new key is learned
    assert shown(source.host_key_seen(str(work))) == sshd.fingerprint()


def test_a_server_answering_for_github_is_checked_against_its_published_keys(sshd, tmp_path, monkeypatch):
    """A host name taken over (here: github.com resolving to the test's sshd) is refused
    from the very first clone: no key of the server is ever accepted for github.com."""
    bare, _ = private_repository(tmp_path, {"index.html": "hello\n"})
    public, private = new_key_pair("test")
    sshd.authorize(public)
    monkeypatch.setattr(hosts, "pinned", lambda url, scheme: ("github.com", "127.0.0.1"))
    url, work = f"ssh://{sshd.user}@github.com:{sshd.port}{bare}", tmp_path / "job"
    work.mkdir(mode=0o700)
    with pytest.raises(source.SourceError, match="host key changed") as refused:
        source.clone(url, None, str(work / "src"), allowed=("ssh",), identity=private, workdir=str(work))
    assert "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU" in str(refused.value)  # github's ed25519 key
    assert "Connection from 127.0.0.1" in sshd.output()  # it did reach the server, which was refused
    assert "Accepted publickey" not in sshd.output()
    assert source.host_key_seen(str(work)) == host_keys.published()["github.com"][0]  # nothing learned


def _last_job(client, service_id, kind: str, seconds: float = 300) -> dict:
    """The service's newest deploy job once it is a ``kind`` job that ended."""
    deadline, job = time.monotonic() + seconds, None
    while job is None or job["kind"] != kind or job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
        job = client.get(f"/api/services/{service_id}/deploys").json()["data"][0]
    return job


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_service_pins_its_host_key_and_a_changed_one_fails_until_forgotten(start_panel, sshd, tmp_path):
    marker = "pinned-" + time.strftime("%H%M%S")
    bare, commit = private_repository(tmp_path, {"Containerfile": CONTAINERFILE, "index.html": marker + "\n"})
    client, customer, made = start_panel()
    key = client.post("/api/deploy-keys", json={"name": "site", "customer_id": customer["id"]}).json()
    sshd.authorize(key["public_key"])

    service_id = _create(client, customer, made, "pinned", deploy_method="git", git_url=sshd.url(bare),
                         deploy_key_id=key["id"])
    first = _until(client, service_id, "running", seconds=300)
    assert first["ssh_host_key"] == sshd.fingerprint() and first["commit"] == commit
    assert marker in _get(first["url"])

    old = sshd.fingerprint()
    sshd.new_host_key()
    assert client.post(f"/api/services/{service_id}/redeploy").status_code == 200
    job = _last_job(client, service_id, "redeploy")
    assert job["status"] == "failed" and "host key changed" in job["error"], job
    kept = _until(client, service_id, "running", seconds=60)  # the release it ran keeps running
    assert (kept["release"], kept["ssh_host_key"]) == (first["release"], old)
    assert marker in _get(kept["url"])

    for value in ("SHA256:" + "A" * 43, sshd.fingerprint(), ""):  # a key is learned, never given
        refused = client.patch(f"/api/services/{service_id}", json={"ssh_host_key": value})
        assert refused.status_code == 422 and "only null" in refused.json()["error"]["fields"]["ssh_host_key"], \
            refused.text
    assert client.get(f"/api/services/{service_id}").json()["ssh_host_key"] == old

    forgotten = client.patch(f"/api/services/{service_id}", json={"ssh_host_key": None})
    assert forgotten.status_code == 200 and forgotten.json()["ssh_host_key"] is None, forgotten.text
    assert client.post(f"/api/services/{service_id}/redeploy").status_code == 200
    job = _last_job(client, service_id, "redeploy")
    assert job["status"] == "succeeded", job
    detail = _until(client, service_id, "running", seconds=60)
    assert detail["ssh_host_key"] == sshd.fingerprint() != old and detail["release"] == first["release"] + 1
    assert marker in _get(detail["url"])
    _work_done(tmp_path / "work")


def _work_done(work, seconds: float = 60) -> None:
    """Until the jobs' work folders are gone: the last job retires the old release (the
    drain) before it removes its own."""
    deadline = time.monotonic() + seconds
    while work.exists() and os.listdir(work):
        assert time.monotonic() < deadline, os.listdir(work)
        time.sleep(0.2)
