"""Fetching sources with real git against real repositories on loopback, no engine: the
host check again at clone time (DNS rebinding, with the resolver answer swapped between
create and clone) and git pinned to the checked address, git's dumb HTTP transport (a
shallow clone is refused, a full one follows), the size cap, cancelling a clone, and
``file://`` refused without ``SLIPWAY_GIT_ALLOW_PRIVATE``."""
from __future__ import annotations

import os
import threading
import time

import pytest

from core.errors import Invalid
from plugins.source_common import hosts, source
from ports.runtime import Cancelled
from tests.fixtures.dumb_http import DumbHttp, bare
from tests.support.git_repos import repository

ALLOWED = ("https", "http", "ssh", "file")


@pytest.fixture
def served(tmp_path):
    """(dumb HTTP server over tmp_path/served, commit of its repo.git)."""
    _, first = repository(tmp_path / "work-tree", {"Containerfile": "FROM scratch\n", "index.html": "hello\n"})
    (tmp_path / "served").mkdir()
    bare(tmp_path / "work-tree", tmp_path / "served" / "repo.git")
    with DumbHttp(tmp_path / "served") as server:
        yield server, first


def test_dumb_http_refuses_a_shallow_clone_and_gets_a_full_one(served, tmp_path):
    server, first = served
    commit, branch = source.clone(f"{server.url}/repo.git", None, str(tmp_path / "job" / "src"), allowed=ALLOWED,
                                  allow_private=True)
    assert (commit, branch) == (first, "main")
    assert (tmp_path / "job" / "src" / "index.html").read_text() == "hello\n"
    assert not (tmp_path / "job" / "src" / ".git").exists()


def test_a_name_that_turns_private_between_create_and_clone_is_refused_at_clone(monkeypatch, tmp_path):
    answers = {"repo.example.com": ["93.184.216.34"]}
    monkeypatch.setattr(hosts, "resolve", lambda host, timeout=hosts.RESOLVE_TIMEOUT_S: answers.get(host))
    settings = source.Settings(allowed=ALLOWED)
    source.check_source("https://repo.example.com/acme/site.git", "git_url", settings)  # public at create
    answers["repo.example.com"] = ["93.184.216.34", "127.0.0.1"]  # the name now also points home
    dest = tmp_path / "job" / "src"
    with pytest.raises(source.SourceError, match="repo.example.com resolves to 127.0.0.1, which is a loopback"):
        source.clone("https://repo.example.com/acme/site.git", None, str(dest), allowed=ALLOWED)
    answers["repo.example.com"] = ["169.254.169.254"]
    with pytest.raises(source.SourceError, match="link-local"):
        source.clone("ssh://git@repo.example.com/acme/site.git", None, str(dest), allowed=ALLOWED)
    assert not dest.exists()  # git never ran
    with pytest.raises(Invalid):
        source.check_source("https://repo.example.com/acme/site.git", "git_url", settings)


def test_the_clone_connects_only_to_the_address_that_was_checked(served, monkeypatch, tmp_path):
    """The name does not exist in DNS: the clone works only because git is handed the
    checked address (curl's resolve list) instead of looking the name up itself."""
    server, first = served
    monkeypatch.setattr(hosts, "resolve", lambda host, timeout=0: ["127.0.0.1"] if host == "pinned.invalid" else None)
    monkeypatch.setattr(hosts, "refusal", lambda host, addresses: None)  # let the loopback test server count as public
    url = f"http://pinned.invalid:{server.port}/repo.git"
    commit, _ = source.clone(url, None, str(tmp_path / "job" / "src"), allowed=ALLOWED)
    assert commit == first
    assert server.hosts and set(server.hosts) == {f"pinned.invalid:{server.port}"}  # the name kept for the server


def test_a_clone_larger_than_the_limit_fails(tmp_path):
    url, _ = repository(tmp_path / "big", {"README.md": "big\n"})
    (tmp_path / "big" / "blob.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    from tests.support.git_repos import git
    git(tmp_path / "big", "add", "-A")
    git(tmp_path / "big", "commit", "-q", "-m", "blob")
    with pytest.raises(source.SourceError, match=r"larger than 1 MB \(SLIPWAY_SOURCE_MAX_MB\)"):
        source.clone(url, None, str(tmp_path / "job" / "src"), allowed=ALLOWED, allow_private=True,
                     max_bytes=1024 * 1024)
    commit, _ = source.clone(url, None, str(tmp_path / "job2" / "src"), allowed=ALLOWED, allow_private=True,
                             max_bytes=10 * 1024 * 1024)  # checkout and pack, about 6 MB
    assert len(commit) == 40


def test_cancel_stops_a_clone(served, tmp_path):
    server, _ = served
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled, match="cancelled: cloning"):
        source.clone(f"{server.url}/slow/repo.git", None, str(tmp_path / "job" / "src"), allowed=ALLOWED,
                     allow_private=True, cancel=cancel)
    assert time.monotonic() - started < 10  # generous: the server would hold it 120 s


def test_file_urls_and_private_hosts_are_refused_at_clone_without_the_setting(tmp_path):
    url, _ = repository(tmp_path / "repo", {"README.md": "x\n"})
    with pytest.raises(source.SourceError, match="file:// URLs read the server's own files"):
        source.clone(url, None, str(tmp_path / "job" / "src"), allowed=ALLOWED)
    with pytest.raises(source.SourceError, match="127.0.0.1 is a loopback address"):
        source.clone("https://127.0.0.1:9/x.git", None, str(tmp_path / "job" / "src"), allowed=ALLOWED)
    with pytest.raises(source.SourceError, match="does not resolve"):
        source.clone("https://no-such-host.invalid/x.git", None, str(tmp_path / "job" / "src"), allowed=ALLOWED)


@pytest.mark.parametrize("address, public", [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True), ("100.64.0.1", False), ("192.0.2.1", False),
    ("224.0.0.1", False), ("64:ff9b::a00:1", False), ("2002:7f00:1::", False), ("::ffff:10.0.0.1", False),
    ("fe80::1%1", False), ("fec0::1", False),
])
def test_address_policy(address, public):
    assert (hosts.not_public(address) is None) is public


def test_every_transport_is_pinned_to_the_checked_address(monkeypatch, tmp_path):
    answers = {"repo.example.com": ["93.184.216.34"], "v6.example.com": ["2606:4700::6810:84e5"]}
    monkeypatch.setattr(hosts, "resolve", lambda host, timeout=0: answers.get(host))
    url, options, ssh = source._connection("https://u:t@repo.example.com/acme/site.git", "https", False)
    assert url == "https://u:t@repo.example.com/acme/site.git" and ssh == ()
    assert options == ["-c", "http.curloptResolve=repo.example.com:443:93.184.216.34",
                       "-c", "http.followRedirects=false"]
    _, options, _ = source._connection("http://v6.example.com:8080/x.git", "http", False)
    assert options[1] == "http.curloptResolve=v6.example.com:8080:[2606:4700::6810:84e5]"
    for ssh_url in ("ssh://git@repo.example.com:2222/acme/site.git", "git@repo.example.com:acme/site.git"):
        url, options, ssh = source._connection(ssh_url, "ssh", False)
        assert url == ssh_url and options == []
        assert ssh == ("-o", "HostName=93.184.216.34", "-o", "HostKeyAlias=repo.example.com")
    assert source._connection("git://repo.example.com:9419/x.git", "git", False)[0] == "git://93.184.216.34:9419/x.git"
    assert source._connection("git://v6.example.com/x.git", "git", False)[0] == "git://[2606:4700::6810:84e5]/x.git"


def test_git_runs_with_nothing_of_the_server_users(monkeypatch, tmp_path):
    for name, value in (("SSH_AUTH_SOCK", "/run/agent"), ("XDG_CONFIG_HOME", "/root/.config"),
                        ("GIT_CONFIG_GLOBAL", "/root/.gitconfig"), ("HTTPS_PROXY", "http://proxy:3128")):
        monkeypatch.setenv(name, value)
    env = source._git_env(str(tmp_path), ("-o", "HostName=93.184.216.34"))
    assert set(env) == {"PATH", "HOME", "LC_ALL", "GIT_TERMINAL_PROMPT", "GIT_ASKPASS", "SSH_ASKPASS",
                        "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT"}
    assert env["HOME"] == str(tmp_path / "git-home") and os.listdir(env["HOME"]) == []
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_SSH_COMMAND"] == (
        "ssh -F /dev/null -o IdentitiesOnly=yes -o IdentityFile=none -o IdentityAgent=none -o BatchMode=yes "
        f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={tmp_path}/known_hosts -o HostName=93.184.216.34")


def _moved_on(tmp_path):
    """A repository whose branch moved on past a pushed commit: (URL, pushed, newest)."""
    from tests.support.git_repos import commit

    url, _ = repository(tmp_path / "moving", {"index.html": "first\n"})
    pushed = commit(tmp_path / "moving", {"index.html": "pushed\n"}, "pushed")
    newest = commit(tmp_path / "moving", {"index.html": "newest\n"}, "newest")
    return url, pushed, newest


def test_a_pushed_commit_is_checked_out_when_the_branch_moved_on(tmp_path):
    url, pushed, newest = _moved_on(tmp_path)
    dest = tmp_path / "job" / "src"
    commit, branch = source.clone(url, "main", str(dest), allowed=ALLOWED, allow_private=True, commit=pushed)
    assert (commit, branch) == (pushed, "main") and pushed != newest
    assert (dest / "index.html").read_text() == "pushed\n" and not (dest / ".git").exists()
    head, _ = source.clone(url, "main", str(tmp_path / "job2" / "src"), allowed=ALLOWED, allow_private=True,
                           commit=newest)
    assert head == newest


def test_a_pushed_commit_over_dumb_http(tmp_path):
    url, pushed, _ = _moved_on(tmp_path)
    (tmp_path / "served").mkdir()
    bare(tmp_path / "moving", tmp_path / "served" / "repo.git")
    with DumbHttp(tmp_path / "served") as server:
        commit, _ = source.clone(f"{server.url}/repo.git", "main", str(tmp_path / "job" / "src"), allowed=ALLOWED,
                                 allow_private=True, commit=pushed)
    assert commit == pushed and (tmp_path / "job" / "src" / "index.html").read_text() == "pushed\n"


def test_a_commit_the_repository_does_not_have_fails_naming_it(tmp_path):
    url, _, _ = _moved_on(tmp_path)
    missing = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(source.SourceError, match="commit 0123456789ab is not in the repository"):
        source.clone(url, "main", str(tmp_path / "job" / "src"), allowed=ALLOWED, allow_private=True, commit=missing)
    with pytest.raises(source.SourceError, match="40 hexadecimal digits"):
        source.clone(url, "main", str(tmp_path / "job2" / "src"), allowed=ALLOWED, allow_private=True,
                     commit="--upload-pack=touch /tmp/x")


def _history(tmp_path, count=4):
    """A repository of ``count`` commits on main: (URL, commits oldest first)."""
    from tests.support.git_repos import commit

    url, first = repository(tmp_path / "history", {"index.html": "0\n"})
    return url, [first] + [commit(tmp_path / "history", {"index.html": f"{n}\n"}, f"commit {n}")
                           for n in range(1, count)]


def test_a_clone_reads_the_ancestry_of_what_it_checked_out(tmp_path):
    url, commits = _history(tmp_path, 5)
    ancestry = []
    head, _ = source.clone(url, "main", str(tmp_path / "job" / "src"), allowed=ALLOWED, allow_private=True,
                           ancestry=ancestry)
    assert head == commits[-1] and ancestry == commits[-2::-1]  # newest first, the commit itself not among them
    ancestry = []
    pushed, _ = source.clone(url, "main", str(tmp_path / "job2" / "src"), allowed=ALLOWED, allow_private=True,
                             commit=commits[2], ancestry=ancestry)
    assert pushed == commits[2] and ancestry == [commits[1], commits[0]]
    assert not (tmp_path / "job2" / "src" / ".git").exists()


def test_a_clone_reads_at_most_the_bounded_ancestry(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "ANCESTRY", 2)
    url, commits = _history(tmp_path, 5)
    ancestry = []
    source.clone(url, "main", str(tmp_path / "job" / "src"), allowed=ALLOWED, allow_private=True, ancestry=ancestry)
    assert ancestry == [commits[3], commits[2]]


def test_of_commits_pushed_into_one_job_the_newest_of_the_branch_is_checked_out(tmp_path):
    url, commits = _history(tmp_path, 4)
    for n, arrived in enumerate([(commits[3], commits[1]), (commits[1], commits[3], commits[2]),
                                 (commits[2], "0123456789abcdef0123456789abcdef01234567")]):
        dest = tmp_path / f"job{n}" / "src"
        chosen, _ = source.clone(url, "main", str(dest), allowed=ALLOWED, allow_private=True, commits=arrived)
        assert chosen == max(arrived, key=lambda c: commits.index(c) if c in commits else -1)
        assert (dest / "index.html").read_text() == f"{commits.index(chosen)}\n"


def test_a_server_that_filters_sends_the_history_without_its_trees(tmp_path):
    """``uploadpack.allowFilter`` (GitHub's, GitLab's): the deepening asks for commits
    only, and checking out an older one fetches its tree then."""
    from tests.support.git_repos import git

    url, commits = _history(tmp_path, 5)
    git(tmp_path / "history", "config", "uploadpack.allowFilter", "true")
    ancestry = []
    dest = tmp_path / "job" / "src"
    chosen, _ = source.clone(url, "main", str(dest), allowed=ALLOWED, allow_private=True,
                             commits=(commits[3], commits[1]), ancestry=ancestry)
    assert chosen == commits[3] and (dest / "index.html").read_text() == "3\n"
    assert ancestry == commits[2::-1]
