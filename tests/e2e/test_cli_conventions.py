"""The operator CLI as operators expect it, run as a process: ``--help`` for every command
and subcommand, ``partner list``, one database rule (no command but ``init`` creates a
database, and never in the folder it runs in), and a clean exit when stdout closes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.cli.main import build_parser, main
from tests.support.processes import slipway


def _run(*args, cwd=None, env=None, stdout=subprocess.PIPE):
    full = {k: v for k, v in dict(os.environ, PYTHONPATH=os.getcwd(), **(env or {})).items() if v is not None}
    return subprocess.run([sys.executable, "-m", "app.cli.main", *args], cwd=cwd, env=full, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def _commands():
    """Every command path of the parser: ("init",), ("partner",), ("partner", "list"), ..."""
    def walk(parser, prefix):
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            for name, sub in action.choices.items():
                yield prefix + (name,)
                yield from walk(sub, prefix + (name,))
    return list(walk(build_parser(), ()))


def test_slipway_help_lists_every_command_with_a_line_each():
    done = _run("--help")
    assert done.returncode == 0 and done.stderr == ""
    listed = done.stdout.split("commands:", 1)[1]
    tops = sorted({path[0] for path in _commands()})
    assert len(tops) == 15 and "settings" in tops  # slipway settings (every setting, its value and source)
    for name in tops:
        line = next(line for line in listed.splitlines() if line.strip().startswith(name))
        # the summary is on the command's line, or the next one when the name is long
        after = listed.split(line, 1)[1].splitlines()[1] if line.strip() == name else line
        assert len((line.strip()[len(name):] or after).strip()) > 10, (name, listed)


def test_a_subcommands_help_as_a_process():
    done = _run("token", "create", "--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "Mint a partner API token" in done.stdout and "--partner PARTNER" in done.stdout
    assert "Prints: the token record" in done.stdout


@pytest.mark.parametrize("path", _commands(), ids=" ".join)
def test_every_command_and_subcommand_has_help_saying_what_it_does(path, capsys):
    """The CLI's own entry point in this process (a process each would take minutes)."""
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr()
    assert out.err == ""
    text = out.out
    assert text.startswith(f"usage: slipway {' '.join(path)}")
    description = text.split("\n\n", 2)[1]
    assert description[0].isupper() and description.rstrip().endswith("."), text
    parser = build_parser()
    for part in path:
        parser = next(a for a in parser._subparsers._group_actions).choices[part]
    if parser._subparsers:  # a group: its subcommands, each with a line
        for name in next(a for a in parser._subparsers._group_actions).choices:
            assert name in text.split("subcommands:", 1)[1]
    else:  # a command: what it prints, and a word on each flag
        assert "Prints: " in text
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, (path, action.dest)
                assert action.option_strings[-1] in text


def test_partner_list(migrated_database_url):
    assert slipway(migrated_database_url, "partner", "list")[1] == []
    _, root = slipway(migrated_database_url, "partner", "create", "--name", "Operator", "--type", "root")
    _, child = slipway(migrated_database_url, "partner", "create", "--name", "Reseller", "--parent", root["id"])
    _, listed = slipway(migrated_database_url, "partner", "list")
    assert listed == [root, child]
    assert set(listed[1]) == {"id", "name", "type", "parentId", "createdAt"} and listed[1]["parentId"] == root["id"]


def test_only_init_creates_a_database_and_never_in_the_current_folder(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {"HOME": str(home), "SLIPWAY_DATABASE_URL": None, "SLIPWAY_DATA_DIR": None, "XDG_DATA_HOME": None}
    default = home / ".local" / "share" / "slipway" / "slipway.db"
    for args in (("apikey", "list"), ("partner", "list"), ("serve", "--port", "1")):
        refused = _run(*args, cwd=work, env=env)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        error = json.loads(refused.stdout)["error"]
        assert error["code"] == "configuration" and str(default) in error["message"]
        assert "slipway init" in error["message"]
    assert list(work.iterdir()) == [] and not home.exists()  # nothing made, here or there

    made = _run("init", cwd=work, env=env)
    assert made.returncode == 0 and json.loads(made.stdout)["database"] == f"sqlite:///{default}"
    assert default.is_file() and list(work.iterdir()) == []
    assert json.loads(_run("apikey", "list", cwd=work, env=env).stdout) == {"apiKeys": []}

    # SLIPWAY_DATA_DIR names the folder; a relative one is the start folder's, said once
    data = dict(env, SLIPWAY_DATA_DIR="state")
    assert json.loads(_run("apikey", "list", cwd=work, env=data).stdout)["error"]["code"] == "configuration"
    assert json.loads(_run("init", cwd=work, env=data).stdout)["database"] == f"sqlite:///{work}/state/slipway.db"
    # SLIPWAY_DATABASE_URL wins, and a missing file is refused too
    missing = dict(env, SLIPWAY_DATABASE_URL=f"sqlite:///{tmp_path}/typo.db")
    assert json.loads(_run("partner", "list", cwd=work, env=missing).stdout)["error"]["code"] == "configuration"
    assert not (tmp_path / "typo.db").exists()


def test_a_closed_pipe_ends_quietly_with_the_sigpipe_status(migrated_database_url):
    for n in range(3):
        slipway(migrated_database_url, "partner", "create", "--name", f"Partner {n}")
    env = {"SLIPWAY_DATABASE_URL": migrated_database_url}
    for args, statuses in ((("partner", "list"), {141}), (("partner", "nope"), {141}), (("--help",), {0, 141})):
        read_end, write_end = os.pipe()
        os.close(read_end)  # nobody will read: the first write fails with EPIPE
        try:
            done = _run(*args, env=env, stdout=write_end)
        finally:
            os.close(write_end)
        assert done.returncode in statuses and done.stderr == "", (args, done.returncode, done.stderr)
    # and through a shell's pipe into head, as an operator types it
    full = dict(os.environ, PYTHONPATH=os.getcwd(), SLIPWAY_DATABASE_URL=migrated_database_url)
    piped = subprocess.run(["sh", "-c", f'"{sys.executable}" -m app.cli.main partner list | head -c1'], env=full,
                           capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout == "[" and piped.stderr == "", piped.stderr
