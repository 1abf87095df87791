"""Engine-aware backups: a database component's own dump, restore and check, run through
the runtime port's commands in containers (``exec_output``, ``exec_input``, ``put_file``).

A compose component labelled ``slipway.backup: postgres|mysql|redis`` is an *engine
component*. A backup dumps it from its running container, consistent while it serves:

- ``postgres``: ``pg_dumpall --clean --if-exists`` as the ``postgres`` user (one
  snapshot per database; roles and every database);
- ``mysql``: ``mariadb-dump --all-databases --single-transaction --routines --events``
  (``mysqldump`` when the image has no ``mariadb-dump``) as the database's ``root``;
- ``redis``: ``redis-cli --rdb`` (the server's own snapshot, taken by a replica's sync)
  into a temporary file in the container, streamed out and removed.

Credentials come from the component's own environment (the container's, which every
command run in it inherits), never through Slipway: ``POSTGRES_USER`` (default
``postgres``) and ``POSTGRES_PASSWORD`` (or ``PGPASSWORD``); ``MARIADB_ROOT_PASSWORD``
(or ``MYSQL_ROOT_PASSWORD``; without one, root's socket authentication); ``REDIS_PASSWORD``
(or ``REDISCLI_AUTH``) and ``REDIS_PORT`` (default 6379). The commands are shell scripts
run with ``sh -c``, so the image needs a POSIX shell; PostgreSQL's binaries are looked for
on ``PATH`` and under ``/usr/lib/postgresql/*/bin`` (Debian's layout).

The volumes that only engine components mount are not archived (a copy of a database's
files taken while it writes is not a consistent backup; the dump is); a volume that another
component mounts too is archived as today. The backup's ``kind`` is the engine's when it
holds one engine component's dump (a service with several engines: the first one's, in
compose order), else ``volumes``.

Restore loads each dump into the running component: ``postgres`` closes the other
sessions, then feeds the dump to ``psql`` (``--clean`` dumps drop and re-create what they
hold; the errors a live cluster always answers, such as the current user that cannot be
dropped, are expected and ignored, any other error fails the restore); ``mysql`` feeds it
to ``mariadb`` (or ``mysql``), which stops at the first error, then flushes privileges;
``redis`` turns saving and the append-only file off in the running server, replaces its
``dbfilename`` in its ``dir`` with the dump (same owner), stops it without saving and
starts its container again, so the server loads the dump. When the append-only file was
on, a server started with it on loads that file and never the RDB file (Redis 7.0 starts
empty when it is missing): its files are removed and the dump is also put as a single
``appendfilename`` in ``dir``, the layout of Redis before 7, which Redis 6 loads (an RDB
file is an append-only file with its RDB preamble) and Redis 7 upgrades at start-up (its
first base file) and loads.

Verification (:func:`verify_parts`) restores each dump into a scratch container of the
component's image, on a network of its own, with a fresh server started by the check
itself (``initdb``; ``mariadb-install-db``; ``redis-server``) and runs the engine's own
check: ``postgres`` the load without unexpected errors, ``select 1`` and a query of every
restored database's catalog; ``mysql`` the load, then ``mariadb-check --all-databases``
(``mysqlcheck``) with every table ``OK``; ``redis`` ``redis-check-rdb`` and the server
loading the file. The scratch container and network carry the label
``slipway.helper=verify`` (so a cleanup finds any leftover) and are removed afterwards.
"""
from __future__ import annotations

import secrets

from core.panel import containerfiles
from core.panel.containers import COMPONENT_LABEL, ContainerSpec

KINDS = ("postgres", "mysql", "redis")
BACKUP_LABEL = "slipway.backup"
HELPER_LABEL = "slipway.helper"
VOLUMES = "volumes"
SCRATCH_DUMP = "/tmp/slipway-dump"
READY_S = 120  # seconds a server may take to answer after (re)starting
STOP_S = 60  # seconds a Redis server may take to exit after SHUTDOWN NOSAVE


class DumpError(Exception):
    """A dump, restore or check of an engine component failed; the message says why."""


# --- the compose side -------------------------------------------------------------------


def _labels(raw) -> dict:
    labels = raw.get("labels") if isinstance(raw, dict) else None
    if isinstance(labels, dict):
        return {str(k): str(v) for k, v in labels.items()}
    if isinstance(labels, list):
        return dict(str(item).partition("=")[::2] for item in labels)
    return {}


def engine_components(document) -> dict:
    """``{component: {"kind", "image", "volumes"}}`` of the engine components of a loaded
    compose document (``core.panel.compose.loader.load_compose``), in compose order; an
    unknown ``slipway.backup`` value is ignored (such a component is backed up through
    its volumes)."""
    found = {}
    services = (document or {}).get("services") if isinstance(document, dict) else None
    for name, raw in (services or {}).items():
        kind = _labels(raw).get(BACKUP_LABEL, "").strip()
        if kind in KINDS:
            found[str(name)] = {"kind": kind, "image": str(raw.get("image") or ""),
                                "volumes": sorted(_named_volumes(raw))}
    return found


def _named_volumes(raw) -> set:
    names = set()
    for entry in raw.get("volumes") or () if isinstance(raw, dict) else ():
        source = entry.get("source") if isinstance(entry, dict) else str(entry).split(":")[0]
        if source and not str(source).startswith(("/", ".", "~")):
            names.add(str(source))
    return names


def archived_volumes(document, volumes) -> tuple:
    """``volumes`` (the service's named volumes) without those only engine components
    mount."""
    engines = engine_components(document)
    services = (document or {}).get("services") or {} if isinstance(document, dict) else {}
    others = set()
    for name, raw in services.items():
        if str(name) not in engines:
            others |= _named_volumes(raw)
    engine_only = {v for e in engines.values() for v in e["volumes"]} - others
    return tuple(v for v in volumes if v not in engine_only)


def backup_kind(engines: dict) -> str:
    """The backup's ``kind``: the first engine component's, else ``volumes``."""
    return next((e["kind"] for e in engines.values()), VOLUMES)


# --- the commands -----------------------------------------------------------------------

_PG_PATH = 'for d in /usr/lib/postgresql/*/bin; do [ -d "$d" ] && PATH="$d:$PATH"; done; export PATH; '
_PG_AUTH = ('export PGPASSWORD="${PGPASSWORD:-${POSTGRES_PASSWORD:-}}"; [ -n "$PGPASSWORD" ] || unset PGPASSWORD; '
            'U="${POSTGRES_USER:-postgres}"; ')
_MY_AUTH = ('P="${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}"; [ -z "$P" ] || export MYSQL_PWD="$P"; '
            'pick() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 && { echo "$c"; return 0; }; done; '
            'echo "none of $* in the image" >&2; return 127; }; ')
_REDIS_AUTH = ('A="${REDISCLI_AUTH:-${REDIS_PASSWORD:-}}"; if [ -n "$A" ]; then export REDISCLI_AUTH="$A"; '
               'else unset REDISCLI_AUTH; fi; R="redis-cli -p ${REDIS_PORT:-6379}"; ')
# errors a pg_dumpall --clean script always meets in a cluster that has its own roles and
# databases already (it cannot drop what it is connected as or to); any other is a failure
_PG_EXPECTED = ("current user cannot be dropped", "already exists", "cannot drop the currently open database",
                "cannot drop a template database")


def _pg_load(source: str) -> str:
    """Load a dump with psql (``source``: ``-f FILE``, or empty for standard input); fail
    with the first unexpected errors."""
    return (f'E=$(psql -X -q -v ON_ERROR_STOP=0 -U "$U" -d postgres {source} 2>&1 >/dev/null '
            '| grep -E "ERROR|FATAL|error:" | grep -v -E \'' + "|".join(_PG_EXPECTED) + '\'); '
            'if [ -n "$E" ]; then echo "$E" | head -n 5 >&2; exit 1; fi; ')


def _wait(probe: str, what: str) -> str:
    return (f'n=0; until {probe}; do n=$((n+1)); [ $n -lt {READY_S * 5} ] || {{ {what}; exit 1; }}; '
            'sleep 0.2; done; ')


_PG_WAIT = _wait('pg_isready -q -U "$U" >/dev/null 2>&1', 'echo "the server does not answer" >&2')
_MY_WAIT = _wait('"$a" -uroot ping >/dev/null 2>&1', 'echo "the server does not answer" >&2')

DUMP = {  # kind: (argv, user); the dump is the standard output
    "postgres": (("sh", "-c", _PG_PATH + _PG_AUTH + 'exec pg_dumpall -U "$U" --clean --if-exists'), "postgres"),
    "mysql": (("sh", "-c", _MY_AUTH + 'd=$(pick mariadb-dump mysqldump) || exit 127; exec "$d" -uroot '
               '--all-databases --single-transaction --routines --events --triggers --hex-blob'), None),
    "redis": (("sh", "-c", _REDIS_AUTH + 'f=$(mktemp) || exit 1; $R --rdb "$f" >&2 || { s=$?; rm -f "$f"; '
               'exit $s; }; cat "$f"; s=$?; rm -f "$f"; exit $s'), None),
}

RESTORE = {  # kind: (argv, user); the dump is the standard input
    "postgres": (("sh", "-c", _PG_PATH + _PG_AUTH + _PG_WAIT
                  + 'psql -X -q -U "$U" -d postgres -c "select pg_terminate_backend(pid) from pg_stat_activity '
                  'where pid <> pg_backend_pid() and backend_type = \'client backend\'" >/dev/null || exit 1; '
                  + _pg_load("") + 'exit 0'), "postgres"),
    "mysql": (("sh", "-c", _MY_AUTH + 'c=$(pick mariadb mysql) || exit 127; a=$(pick mariadb-admin mysqladmin) || '
               'exit 127; ' + _MY_WAIT + '"$c" -uroot && "$c" -uroot -e "FLUSH PRIVILEGES"'), None),
}

# kind: (script, user), run in the scratch container with the dump at SCRATCH_DUMP
VERIFY = {
    "postgres": (_PG_PATH + 'tail -c 300 ' + SCRATCH_DUMP + ' | grep -q "cluster dump complete" || '
                 '{ echo "the dump is incomplete (no end marker)" >&2; exit 1; }; '
                 'D=/tmp/slipway-verify; rm -rf $D; mkdir -p $D || exit 1; '
                 'initdb -D $D/data -U postgres --auth=trust -E UTF8 >$D/initdb.log 2>&1 '
                 '|| { tail -n 20 $D/initdb.log >&2; exit 1; }; '
                 'pg_ctl -D $D/data -l $D/server.log -w -t ' + str(READY_S) + ' -o "-c listen_addresses= -k $D" '
                 'start >/dev/null || { tail -n 20 $D/server.log >&2; exit 1; }; export PGHOST=$D; U=postgres; '
                 + _pg_load('-f ' + SCRATCH_DUMP)
                 + 'psql -X -At -U postgres -d postgres -c "select 1" >/dev/null || exit 1; '
                 'for db in $(psql -X -At -U postgres -d postgres -c "select datname from pg_database '
                 'where datallowconn"); do psql -X -At -U postgres -d "$db" -c "select count(*) from pg_class" '
                 '>/dev/null || { echo "database $db: its catalog cannot be read" >&2; exit 1; }; done; '
                 'pg_ctl -D $D/data -m immediate stop >/dev/null 2>&1; exit 0', "postgres"),
    "mysql": (_MY_AUTH + 'unset MYSQL_PWD; tail -c 300 ' + SCRATCH_DUMP + ' | grep -q "Dump completed" || '
              '{ echo "the dump is incomplete (no end marker)" >&2; exit 1; }; '
              'D=/tmp/slipway-verify; rm -rf $D; mkdir -p $D/data $D/run && chown -R mysql $D || exit 1; '
              'i=$(pick mariadb-install-db mysql_install_db) || exit 127; '
              's=$(pick mariadbd mysqld /usr/sbin/mariadbd /usr/sbin/mysqld) || exit 127; '
              'c=$(pick mariadb mysql) || exit 127; k=$(pick mariadb-check mysqlcheck) || exit 127; '
              '"$i" --user=mysql --datadir=$D/data >$D/install.log 2>&1 || { tail -n 20 $D/install.log >&2; exit 1; }; '
              '"$s" --user=mysql --datadir=$D/data --socket=$D/run/s.sock --skip-networking --skip-grant-tables '
              '--pid-file=$D/run/s.pid >$D/server.log 2>&1 & '
              + _wait('"$c" -S $D/run/s.sock -e "select 1" >/dev/null 2>&1', 'tail -n 20 $D/server.log >&2')
              + '"$c" -S $D/run/s.sock < ' + SCRATCH_DUMP + ' || exit 1; '
              '"$k" -S $D/run/s.sock --all-databases > $D/check.log 2>&1 || { tail -n 20 $D/check.log >&2; exit 1; }; '
              'if grep -i -E "^(error|warning) *:|corrupt" $D/check.log >&2; then exit 1; fi; exit 0', None),
    "redis": ('c=$(command -v redis-check-rdb) || { echo "no redis-check-rdb in the image" >&2; exit 127; }; '
              'D=/tmp/slipway-verify; rm -rf $D; mkdir -p $D && cp ' + SCRATCH_DUMP + ' $D/dump.rdb || exit 1; '
              '"$c" $D/dump.rdb > $D/check.log 2>&1 || { tail -n 20 $D/check.log >&2; exit 1; }; '
              'redis-server --port 0 --unixsocket $D/s.sock --dir $D --dbfilename dump.rdb --save "" '
              '--appendonly no --daemonize yes --logfile $D/server.log || exit 1; '
              + _wait('[ "$(redis-cli -s $D/s.sock ping 2>/dev/null)" = PONG ]', 'tail -n 20 $D/server.log >&2')
              + 'redis-cli -s $D/s.sock dbsize >/dev/null || exit 1; redis-cli -s $D/s.sock shutdown nosave '
              '>/dev/null 2>&1; exit 0', None),
}

# a container that does nothing until it is removed (the scratch server runs beside it)
IDLE = ("sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done")


# --- backup and restore -------------------------------------------------------------------


def _running_container(runtime, service_id: str, component: str) -> str:
    for state in runtime.containers(service_id):
        if state.labels.get(COMPONENT_LABEL) == component and state.running:
            return state.id
    raise DumpError(f"component {component} is not running: a database is dumped from and restored into "
                    "its running container")


def dump_chunks(runtime, service_id: str, component: str, kind: str):
    """A generator of the component's dump, streamed out of its running container."""
    container = _running_container(runtime, service_id, component)
    argv, user = DUMP[kind]
    try:
        yield from runtime.exec_output(container, argv, user=user)
    except Exception as exc:
        raise DumpError(f"dumping {kind} component {component}: {exc}") from exc


def dump_parts(runtime, service_id: str, engines: dict):
    """The ``(name, kind, chunks)`` parts of the engine components, for the archive writer."""
    return [(name, e["kind"], dump_chunks(runtime, service_id, name, e["kind"])) for name, e in engines.items()]


def restore_part(runtime, clock, service_id: str, component: str, kind: str, chunks, size: int) -> None:
    """Load the dump (``size`` bytes of ``chunks``) into the component's running container."""
    container = _running_container(runtime, service_id, component)
    try:
        if kind == "redis":
            _restore_redis(runtime, clock, container, chunks, size)
        else:
            argv, user = RESTORE[kind]
            runtime.exec_input(container, argv, chunks, size, user=user)
    except DumpError:
        raise
    except Exception as exc:
        raise DumpError(f"restoring {kind} component {component}: {exc}") from exc


_REDIS_PREPARE = (_REDIS_AUTH + _wait('[ "$($R ping 2>/dev/null)" = PONG ]', 'echo "redis does not answer" >&2')
                  + 'g() { $R --raw CONFIG GET "$1" | sed -n 2p; }; dir=$(g dir) && f=$(g dbfilename) '
                  '&& aof=$(g appendonly) && ad=$(g appenddirname) && af=$(g appendfilename) && [ -n "$dir" ] '
                  '|| { echo "redis does not answer CONFIG GET" >&2; exit 1; }; '
                  '$R CONFIG SET save "" >/dev/null && $R CONFIG SET appendonly no >/dev/null || exit 1; '
                  'if [ "$aof" = yes ]; then rm -rf "$dir/$ad" "$dir/$af"; a="$dir/$af"; else a=; fi; '
                  'o=$(stat -c "%u %g" "$dir" 2>/dev/null || echo "0 0"); echo "aof=$a"; echo "$dir/$f $o"')
_REDIS_SHUTDOWN = (_REDIS_AUTH + '$R SHUTDOWN NOSAVE >/dev/null 2>&1; exit 0')
_REDIS_READY = _REDIS_AUTH + _wait('[ "$($R ping 2>/dev/null)" = PONG ]',
                                'echo "redis does not answer after loading the dump" >&2') + 'exit 0'


def _restore_redis(runtime, clock, container: str, chunks, size: int) -> None:
    answer = runtime.exec_run(container, ("sh", "-c", _REDIS_PREPARE)).decode("utf-8", "replace").strip()
    aof, target = answer.splitlines()[-2:]
    path, uid, gid = target.rsplit(" ", 2)
    runtime.put_file(container, path, chunks, size, mode=0o600)
    runtime.exec_run(container, ("chown", f"{int(uid)}:{int(gid)}", path))  # the engines' archive copy sets its own
    if aof != "aof=":  # started with the append-only file on, the server loads it and not the RDB file
        runtime.exec_run(container, ("cp", "-p", path, aof.removeprefix("aof=")))
    try:
        runtime.exec_run(container, ("sh", "-c", _REDIS_SHUTDOWN))
    except Exception:  # noqa: BLE001 - the command dies with the container it stops (exit status 137); the wait below decides
        pass
    deadline = clock.monotonic() + STOP_S
    while (state := runtime.inspect(container)) is not None and state.running:
        if clock.monotonic() > deadline:
            raise DumpError(f"redis in {container} did not stop after SHUTDOWN NOSAVE")
        clock.sleep(0.2)
    runtime.start(container)
    runtime.exec_run(container, ("sh", "-c", _REDIS_READY))


# --- verification -------------------------------------------------------------------------


def manifest_parts(manifest: dict) -> list:
    """The parts a manifest records (``parts``, or the ``volumes`` of archives made before
    there were dumps), each with its ``kind`` (``volumes`` when it has none)."""
    entries = manifest.get("parts")
    if entries is None:
        entries = manifest.get("volumes") or ()
    return [{**entry, "kind": entry.get("kind", VOLUMES)} for entry in entries]


def verify_parts(runtime, manifest: dict, read_part, *, service_id: str = "") -> None:
    """Restore each dump of the backup whose ``manifest`` is given into a scratch container
    and run the engine's own check there; returns None when every dump passes, raises
    :class:`DumpError` with the reason otherwise. ``read_part(member)`` gives a part's
    chunks (the archive reader's). The image is the one recorded for the component in
    ``manifest["engines"]``: its ``image_id`` (what the backed-up release ran; archives
    made before it was recorded: its ``image`` reference), the recorded reference held to
    the image rule. Volume parts are not checked here (their archive's own
    integrity is the archive reader's business). Runs for minutes on a large dump: call it
    from a job, not a request."""
    engines = manifest.get("engines") or {}
    images = {name: e.get("image") for name, e in engines.items()}
    for part in manifest_parts(manifest):
        kind = part["kind"]
        if kind == VOLUMES:
            continue
        if kind not in VERIFY:
            raise DumpError(f"part {part.get('name')}: unknown kind {kind!r}")
        image = images.get(part.get("name"))
        if not image:
            raise DumpError(f"part {part.get('name')}: the backup does not record the component's image")
        refused = containerfiles.image_refusal(image, service_id)  # the image rule of every start
        if refused:
            raise DumpError(f"part {part.get('name')}: {refused}")
        ran = str(engines[part.get("name")].get("image_id") or "") or image  # an id Slipway recorded itself
        try:
            verify_dump(runtime, kind, ran, read_part(part["member"]), int(part["size_bytes"]),
                        of=str(manifest.get("backup_id") or ""))
        except DumpError as exc:
            raise DumpError(f"{kind} dump of {part.get('name')}: {exc}") from exc


VERIFY_OF_LABEL = "slipway.verify-of"  # the backup a scratch container and network verify


def verify_dump(runtime, kind: str, image: str, chunks, size: int, of: str = "") -> None:
    """One dump restored and checked in a scratch container of ``image`` on a network of
    its own, both labelled ``slipway.helper=verify`` and ``slipway.verify-of=<of>`` (the
    backup's id); both are removed afterwards, whatever the outcome."""
    token = secrets.token_hex(6)
    labels = {HELPER_LABEL: "verify", VERIFY_OF_LABEL: of}
    network = f"slw-verify-{token}"
    container = None
    try:
        runtime.create_network(network, labels)
        container = runtime.run(ContainerSpec(name=f"slw-verify-{token}", image=image, labels=labels,
                                              command=IDLE, network=network))
        runtime.put_file(container, SCRATCH_DUMP, chunks, size, mode=0o644)
        script, user = VERIFY[kind]
        runtime.exec_run(container, ("sh", "-c", script), user=user)
    except DumpError:
        raise
    except Exception as exc:
        raise DumpError(str(exc)[-2000:] or type(exc).__name__) from exc
    finally:
        if container is not None:
            _quietly(runtime.remove_container, container)
        _quietly(runtime.remove_network, network)


def _quietly(call, *args) -> None:
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - a leftover carries the helper label; the reason that matters is the first one
        pass

