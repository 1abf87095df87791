"""The ssh host keys a clone trusts (plugins/source_common/host_keys.py,
core/panel/host_keys.py), without a network: the published keys of github.com, gitlab.com
and bitbucket.org are the only keys a clone of those hosts accepts, from the first clone
and whatever a service pinned; another host's clone gets its pinned key alone, or learns
the first key shown. The clone's git run is replaced by one that records what it was
given (tests/integration/test_host_keys_ssh.py runs ssh for real)."""
from __future__ import annotations

import pytest

from core.panel import host_keys as rule
from plugins.source_common import host_keys, hosts, source

PUBLISHED = {  # the fingerprints each provider lists beside its keys
    "github.com": ["SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU",
                   "SHA256:p2QAMXNIC1TJYWeIOttrVc98/R1BUFWu3/LiyKgUfQM",
                   "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"],
    "gitlab.com": ["SHA256:eUXGGm1YGsMAS7vkcx6JOJdOGHPem5gQp4taiCfCLB8",
                   "SHA256:HbW3g8zUjNSksFbqTiUWPWg2Bq1x8xdGUrliXFzSnUw",
                   "SHA256:ROQFvPThGrW4RuWLoL9tq9I9zJ42fK4XywyRtbOz/EQ"],
    "bitbucket.org": ["SHA256:ybgmFkzwOSotHTHLJgHO0QN8L0xErw6vd0VhFA9m3SM",
                      "SHA256:FC73VB6C4OQLSCrjEayhMp9UMxS97caD/Yyi2bhW/J0",
                      "SHA256:46OSHA1Rmj8E8ERTC6xkNcmGOw9oFxYr0WF6zWW8l1E"],
}
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIazEu89wgQZ4bqs3d63QSMzYVa0MuJ2e2gKTKqu+UUX"


@pytest.fixture
def runs(monkeypatch, tmp_path):
    """Each clone's (GIT_SSH_COMMAND, known_hosts text) instead of running git;
    ``runs.answer``: the failure git would end with (None: success)."""
    seen = []

    def clone(url, branch, dest, scheme, allowed, timeout, max_bytes, cancel, target, options, env, commit=None,
              commits=(), ancestry=None):
        known = tmp_path / "job" / host_keys.FILE
        seen.append((env["GIT_SSH_COMMAND"], known.read_text() if known.exists() else None))
        if seen.answer:
            raise source.SourceError(seen.answer)
        return "0" * 40, "main"

    seen = type("Runs", (list,), {"answer": None})()
    monkeypatch.setattr(source, "_clone", clone)
    monkeypatch.setattr(hosts, "pinned", lambda url, scheme: (hosts.url_host(url, scheme)[0], "198.51.100.7"))
    (tmp_path / "job").mkdir()
    return seen


def _clone(tmp_path, url, **more):
    return source.clone(url, None, str(tmp_path / "job" / "src"), allowed=("ssh", "https"), **more)


def test_the_shipped_file_holds_each_providers_published_keys():
    published = host_keys.published()
    assert sorted(published) == sorted(PUBLISHED)
    for host, fingerprints in PUBLISHED.items():
        assert [rule.shown(key) for key in published[host]] == fingerprints
        assert published[host][0].startswith("ssh-ed25519 ")  # the pin a service shows


@pytest.mark.parametrize("url, host", [("ssh://git@github.com/acme/site.git", "github.com"),
                                       ("git@GitLab.com:acme/site.git", "gitlab.com"),
                                       ("git@bitbucket.org:acme/site.git", "bitbucket.org")])
@pytest.mark.parametrize("pinned", [None, OTHER])
@pytest.mark.parametrize("allow_private", [False, True])
def test_a_clone_of_a_big_host_checks_its_published_keys_from_the_first_clone(runs, tmp_path, url, host, pinned,
                                                                             allow_private):
    _clone(tmp_path, url, host_key=pinned, allow_private=allow_private)
    [(ssh, known)] = runs
    assert "-o StrictHostKeyChecking=yes" in ssh and "accept-new" not in ssh
    assert f"-o HostKeyAlias={host}" in ssh
    assert known == "".join(f"{host} {key}\n" for key in host_keys.published()[host])  # a pin changes nothing
    assert rule.shown(source.host_key_seen(str(tmp_path / "job"))) == PUBLISHED[host][0]


def test_another_host_learns_the_first_key_then_trusts_the_pinned_one_only(runs, tmp_path):
    url = "ssh://git@git.example.com:2222/acme/site.git"
    _clone(tmp_path, url)
    ssh, known = runs[-1]
    assert "-o StrictHostKeyChecking=accept-new" in ssh and known == ""
    assert "-o HostName=198.51.100.7 -o HostKeyAlias=git.example.com" in ssh  # one name, without the port
    assert source.host_key_seen(str(tmp_path / "job")) is None  # nothing was shown (git did not run)

    _clone(tmp_path, url, host_key=OTHER)
    ssh, known = runs[-1]
    assert "-o StrictHostKeyChecking=yes" in ssh and known == f"git.example.com {OTHER}\n"
    assert source.host_key_seen(str(tmp_path / "job")) == OTHER

    _clone(tmp_path, "https://git.example.com/acme/site.git", host_key=OTHER)  # no ssh: no key, none read back
    assert runs[-1][1] is None
    assert source.host_key_seen(str(tmp_path / "job")) is None


def test_a_refused_key_fails_the_clone_saying_host_key_changed(runs, tmp_path):
    url = "ssh://git@git.example.com/acme/site.git"
    runs.answer = ("cloning x failed:\n@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\n"
                   "Host key verification failed.\nfatal: Could not read from remote repository.")
    with pytest.raises(source.SourceError, match="host key changed") as refused:
        _clone(tmp_path, url, host_key=OTHER)
    assert rule.shown(OTHER) in str(refused.value) and "PATCH ssh_host_key to null" in str(refused.value)
    runs.answer = "cloning x failed:\nremote: Host key verification failed.\nfatal: early EOF"  # the server's words
    with pytest.raises(source.SourceError) as other:
        _clone(tmp_path, url, host_key=OTHER)
    assert "host key changed" not in str(other.value)


@pytest.mark.parametrize("text, key", [
    ("github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"),
    ("|1|c2FsdA==|aGFzaA== " + OTHER, OTHER),  # a hashed host name
    ("[127.0.0.1]:2222 " + OTHER + " comment", OTHER),
    ("@revoked * " + OTHER, None), ("host ssh-ed25519 not*base64", None), ("host ssh-ed25519", None),
    ("", None), (None, None), ("host unknown-type AAAA", None),
])
def test_a_known_hosts_line_gives_its_key(text, key):
    assert rule.key_of(text) == key
