"""Deploy keys against a real ``sshd`` (tests/support/sshd.py) serving a private bare
repository over ssh (``git-upload-pack``), to the deploy key only:

- through a real uvicorn server and a real engine (Podman), a git service naming its
  customer's deploy key deploys from ``ssh://root@127.0.0.1:<port>/...`` and serves; the
  same repository without a key fails (the server's own keys are never used), and
  deploys once a PATCH names the key; an ai service naming it deploys too; another
  customer's service naming the key is 422;
- the private half appears in no HTTP answer, no server log line, no timeline event or
  event of the outbox, and no file is left in the jobs' work folder;
- the clone itself (``source.clone``): the key is used for that clone only, its file
  removed afterwards, and the address checks still refuse a loopback host unless
  ``SLIPWAY_GIT_ALLOW_PRIVATE``.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from app.storage.secrets import new_key, parse_key
from core.panel.deploy_keys import new_key_pair
from plugins.source_common import source
from tests.support.git_repos import CONTAINERFILE, _create, _events, repository
from tests.support.panel_server import _get, _until
from tests.support.sshd import running_sshd

pytestmark = pytest.mark.runtime


@pytest.fixture
def sshd(tmp_path):
    with running_sshd(tmp_path) as running:
        yield running


def private_repository(tmp_path, files: dict) -> tuple:
    """A bare repository in a folder only its owner reads (outside any public place), made
    from a working tree with ``files``: (its path, the commit)."""
    _, commit = repository(tmp_path / "work-tree", files)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    bare = private / "site.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(tmp_path / "work-tree"), str(bare)], check=True,
                   env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
                        "HOME": str(tmp_path)})
    return bare, commit


def _key_lines(text: str) -> list[str]:
    """The base64 lines of an OpenSSH private key (each one alone is secret)."""
    return [line for line in text.splitlines() if line and not line.startswith("-----")]


def test_the_clone_uses_the_key_for_itself_only_and_keeps_the_address_checks(sshd, tmp_path):
    bare, commit = private_repository(tmp_path, {"index.html": "hello\n"})
    public, private = new_key_pair("test")
    sshd.authorize(public)
    url = sshd.url(bare)
    work = tmp_path / "job"
    work.mkdir(mode=0o700)
    cloned, branch = source.clone(url, None, str(work / "src"), allowed=("ssh",), allow_private=True,
                                  identity=private, workdir=str(work))
    assert (cloned, branch) == (commit, "main") and (work / "src" / "index.html").read_text() == "hello\n"
    assert not (work / source.IDENTITY_FILE).exists()  # written for the clone only
    assert not any(line in p.read_text(errors="replace") for p in work.rglob("*") if p.is_file()
                   for line in _key_lines(private))
    with pytest.raises(source.SourceError, match="Permission denied"):  # no key: no other is tried
        source.clone(url, None, str(work / "again"), allowed=("ssh",), allow_private=True, workdir=str(work))
    with pytest.raises(source.SourceError, match="loopback"):  # a key changes nothing of the address checks
        source.clone(url, None, str(work / "third"), allowed=("ssh",), allow_private=False, identity=private,
                     workdir=str(work))
    assert not (work / source.IDENTITY_FILE).exists()


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_service_deploys_from_a_private_repository_with_its_deploy_key(start_panel, sshd, tmp_path, database_url):
    marker = "deployed-by-key-" + os.urandom(6).hex()
    bare, commit = private_repository(tmp_path, {"Containerfile": CONTAINERFILE, "index.html": marker + "\n"})
    secret = new_key()
    client, customer, made = start_panel(SLIPWAY_SECRET_KEY=secret)
    answers = []
    client.event_hooks["response"].append(lambda response: answers.append(response.read().decode("utf-8",
                                                                                                 "replace")))
    made_key = client.post("/api/deploy-keys", json={"name": "site", "customer_id": customer["id"]})
    assert made_key.status_code == 201, made_key.text
    key = made_key.json()
    sshd.authorize(key["public_key"])
    url = sshd.url(bare)

    keyed = _create(client, customer, made, "keyed", deploy_method="git", git_url=url, deploy_key_id=key["id"])
    detail = _until(client, keyed, "running", seconds=300)
    assert detail["deploy_key_id"] == key["id"] and detail["commit"] == commit
    assert marker in _get(detail["url"])
    log = sshd.output()
    assert f"Accepted publickey for {sshd.user} from 127.0.0.1" in log and key["fingerprint"] in log

    keyless = _create(client, customer, made, "keyless", deploy_method="git", git_url=url)
    _until(client, keyless, "failed", seconds=120)
    [failed] = [e["message"] for e in _events(client, keyless) if e["status"] == "failed"]
    assert "Permission denied (publickey)" in failed, failed

    # the key named afterwards (PATCH), a redeploy clones with it
    patched = client.patch(f"/api/services/{keyless}", json={"deploy_key_id": key["id"]})
    assert patched.status_code == 200 and patched.json()["deploy_key_id"] == key["id"], patched.text
    assert client.post(f"/api/services/{keyless}/redeploy").status_code == 200
    assert marker in _get(_until(client, keyless, "running", seconds=300)["url"])

    # the ai method clones with the key too
    analysed = _create(client, customer, made, "analysed", deploy_method="ai", ai_url=url, deploy_key_id=key["id"])
    detail = _until(client, analysed, "running", seconds=300)
    assert detail["deploy_key_id"] == key["id"] and marker in _get(detail["url"])

    other = client.post("/api/customers", json={"name": "Other"}).json()
    refused = client.post("/api/services", json={"name": f"theirs-{os.getpid()}", "customer_id": other["id"],
                                                 "deploy_method": "git", "git_url": url,
                                                 "deploy_key_id": key["id"]})
    assert refused.status_code == 422 and "deploy_key_id" in refused.json()["error"]["fields"], refused.text

    # the private half, read back from the database with the server's key
    from app.storage.store import Store

    store = Store(database_url, threads=1, secret_key=parse_key(secret, "test"))
    try:
        with store.uow(write=False) as uow:
            private = uow.deploy_keys.private_key(key["id"]).text
        rows = store.db.execute_sql("SELECT data FROM event_outbox").fetchall()
    finally:
        store.close()
    lines = _key_lines(private)
    assert len(lines) >= 3
    for service_id in (keyed, keyless, analysed):  # the timelines and the jobs, as answers
        client.get(f"/api/services/{service_id}/events", params={"per_page": 100})
        client.get(f"/api/services/{service_id}/deploys")
    places = {"answers": "\n".join(answers), "server log": start_panel.logs(),
              "event outbox": "\n".join(row[0] for row in rows), "sshd log": sshd.output()}
    for where, text in places.items():
        assert not any(line in text for line in lines), f"the private key is in the {where}"
    assert any("deploy" in text for text in answers)  # the answers were collected
    work = tmp_path / "work"
    assert not any(p.name == source.IDENTITY_FILE for p in work.rglob("*")) if work.exists() else True
