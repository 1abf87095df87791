"""``Store.read``, the read path of every authenticated request (app.storage.readpath): never
waiting on the event loop (SQLite: on the loop, on a connection that never waits, else a
worker thread; PostgreSQL: a worker thread); an answer kept only while the database is
unchanged, so a revocation is seen at once; SQL built once per store, not shared between
stores."""
import asyncio
import sqlite3
import threading

import pytest

from core.errors import Unauthorized
from core.partner import partners, tokens
from tests.support.database import POSTGRES


@pytest.fixture
def secret(store, clock):
    partner = partners.create_partner(store.uow(), clock, name="Reader")
    token, secret = tokens.create_token(store.uow(), clock, partner_id=partner.id, label="r", scope="read",
                                        created_by=None)
    return token, secret


def _closed(connection) -> bool:
    """Whether a driver connection (psycopg2 or sqlite3) is closed."""
    if hasattr(connection, "closed"):  # psycopg2: nonzero once closed
        return bool(connection.closed)
    try:
        connection.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def read(store, secret):
    return asyncio.run(store.read(tokens.identify, secret))


def test_a_revocation_is_seen_on_the_very_next_read(store, clock, secret):
    token, value = secret
    assert read(store, value).token.id == token.id
    assert read(store, value).token.id == token.id
    tokens.revoke_any_token(store.uow(), clock, token.id)  # this thread
    with pytest.raises(Unauthorized):
        read(store, value)
    with pytest.raises(Unauthorized):
        read(store, "pcp_" + "x" * 40)


def test_a_commit_from_another_thread_is_seen_at_once(store, clock, secret):
    token, value = secret
    assert not read(store, value).token.revoked
    worker = threading.Thread(target=tokens.revoke_any_token, args=(store.uow(), clock, token.id))
    worker.start()
    worker.join()
    with pytest.raises(Unauthorized):
        read(store, value)


def test_a_read_never_waits_on_the_loop_and_the_loop_runs_on(store, clock, secret):
    """PostgreSQL: the read runs (and would wait) on a worker thread while the event loop
    goes on. SQLite: it runs on the loop itself, on the loop's own connection."""
    token, value = secret
    loop_thread, seen = [], []

    def identify(uow, secret):
        seen.append(threading.get_ident())
        return tokens.identify(uow, secret)

    async def main():
        loop_thread.append(threading.get_ident())
        started = threading.Event()
        release = threading.Event()

        def slow(uow):
            started.set()
            release.wait(10)

        blocker = asyncio.ensure_future(store.run(slow, None))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        ticked = asyncio.Event()
        asyncio.get_running_loop().call_soon(ticked.set)
        await ticked.wait()  # the loop is free while a worker thread is busy
        release.set()
        await blocker
        return await store.read(identify, value)

    assert asyncio.run(main()).token.id == token.id
    if POSTGRES:
        assert seen and seen[0] != loop_thread[0]
    else:
        assert seen and seen[0] == loop_thread[0]


@pytest.mark.skipif(POSTGRES, reason="the loop's own connection is SQLite's")
def test_a_busy_sqlite_database_sends_the_read_to_a_worker_thread_and_the_loop_runs_on(store, clock, secret):
    """Another connection holds the file exclusively: the loop's read does not wait for it
    (busy_timeout 0) but goes to a worker thread, which waits; the loop goes on, and the
    read answers once the file is free."""
    token, value = secret
    seen = []

    def identify(uow, secret):
        seen.append(threading.get_ident())
        return tokens.identify(uow, secret)

    async def main():
        loop_thread = threading.get_ident()
        store.db.close_idle()  # an exclusive lock in WAL mode needs every other connection closed
        holder = sqlite3.connect(store.db.database, isolation_level=None, check_same_thread=False)
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("UPDATE api_token SET label = 'held' WHERE id = ?", (token.id,))
        seen.clear()
        pending = asyncio.ensure_future(store.read(identify, value))
        ticked = asyncio.Event()
        asyncio.get_running_loop().call_soon(ticked.set)
        await ticked.wait()  # the loop is free while the read waits for the file
        assert not pending.done()
        holder.execute("COMMIT")
        holder.close()
        found = await pending
        return loop_thread, found

    loop_thread, found = asyncio.run(main())
    assert found.token.id == token.id and found.token.label == "held"
    assert seen[0] == loop_thread  # tried on the loop first, answered busy at once
    assert seen[-1] != loop_thread  # then read on a worker thread


@pytest.mark.skipif(POSTGRES, reason="the loop's own connection is SQLite's")
def test_the_loop_connection_writes_nothing(store, clock, secret):
    """A use case that tried to write through Store.read fails; nothing is written."""
    token, value = secret

    def write(uow):
        with uow:
            uow.tokens.revoke(token.id, clock.now())

    with pytest.raises(Exception, match="readonly"):
        asyncio.run(store.read(write))
    assert read(store, value).token.id == token.id


def test_a_change_by_a_connection_of_another_process_shows_on_the_next_read(store, clock, secret):
    """A kept answer never outlives a change: one made by a connection Slipway does not
    know (another process's) shows on the next read."""
    token, value = secret
    read(store, value)
    if POSTGRES:
        tokens.revoke_any_token(store.uow(), clock, token.id)
    else:
        outside = sqlite3.connect(store.db.database, isolation_level=None)
        try:
            outside.execute("UPDATE api_token SET revoked_at = '2026-01-01 00:00:00+00:00' WHERE id = ?", (token.id,))
        finally:
            outside.close()
    with pytest.raises(Unauthorized):
        read(store, value)


@pytest.mark.skipif(POSTGRES, reason="the loop's own connection is SQLite's")
def test_the_loop_keeps_an_answer_while_nothing_is_committed_and_forgets_it_on_any_commit(store, clock, secret):
    """The token's read on the loop's connection runs its statement once while the database
    is unchanged (``Statements.kept``: SQLite's data_version); any commit, of any row, makes
    the next read ask again; an unknown token is never kept."""
    token, value = secret
    read(store, value)  # the loop's connection is opened by its first read
    ran = []
    store.loop_reads.db.connection().set_trace_callback(ran.append)
    looked_up = lambda: sum("api_token" in sql for sql in ran)  # noqa: E731

    assert read(store, value).token.id == token.id
    assert read(store, value).token.id == token.id
    assert looked_up() == 0 and any("data_version" in sql for sql in ran)
    partners.create_partner(store.uow(), clock, name="Unrelated")  # a commit of another table
    assert read(store, value).token.id == token.id
    assert looked_up() == 1
    assert read(store, value).token.id == token.id
    assert looked_up() == 1
    for _ in range(2):
        with pytest.raises(Unauthorized):
            read(store, "pcp_" + "y" * 40)
    assert looked_up() == 3


def test_statements_belong_to_one_store(database_url, clock):
    """Two stores in one process keep their own SQL (a class-level cache would hand one
    store's placeholder style, or its table, to the other)."""
    from app.storage.store import Store

    first, second = Store(database_url, threads=1), Store(database_url, threads=1)
    try:
        first.migrate()
        partner = partners.create_partner(first.uow(), clock, name="Reader")
        _, value = tokens.create_token(first.uow(), clock, partner_id=partner.id, label="r", scope="read",
                                       created_by=None)
        assert read(first, value).partner.id == partner.id  # the first store builds its lookup
        assert first.models.statements is not second.models.statements
        built = []
        second.models.statements.sql("token-by-hash", lambda: built.append(1) or second.models.ApiToken.select())
        assert built == [1], "the second store built its own statement"
        assert read(first, value).partner.id == partner.id
    finally:
        first.close()
        second.close()


def test_close_leaves_a_connection_in_use_to_its_thread_and_closes_it_when_given_back(database_url, clock):
    """A deploy job runs to its end after a shutdown: closing the store must not close its
    connection under a running statement (SQLite crashes the process) nor lose its work."""
    from app.storage.store import Store

    store = Store(database_url, threads=1)
    store.migrate()
    partner = partners.create_partner(store.uow(), clock, name="Reader")
    _, value = tokens.create_token(store.uow(), clock, partner_id=partner.id, label="r", scope="read",
                                   created_by=None)
    read(store, value)
    inside, closed, held = threading.Event(), threading.Event(), []

    def job():  # a job's thread, holding its connection while the store closes
        store.db.connect()
        held.append(store.db.connection())
        inside.set()
        closed.wait(10)
        # still works; its unit of work gives the connection back when it ends
        partners.create_partner(store.uow(), clock, name="Finished after close")

    thread = threading.Thread(target=job)
    thread.start()
    assert inside.wait(10)
    store.close()
    closed.set()
    thread.join(10)
    for connection in held:  # given back after close: closed, not kept
        assert _closed(connection)
    again = Store(database_url, threads=1)
    try:
        count = again.db.execute_sql("SELECT count(*) FROM partner WHERE name = 'Finished after close'").fetchone()[0]
        assert count == 1
    finally:
        again.close()


