"""``Store.read``, the token lookup on every request: on SQLite it runs on the calling
thread with a connection that thread keeps; the keeping must never cost a revocation, a
commit or a checkpoint."""
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
    assert read(store, value).token.id == token.id  # the kept connection, again
    tokens.revoke_any_token(store.uow(), clock, token.id)  # this thread, the pool's connection
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


@pytest.mark.skipif(POSTGRES, reason="SQLite's kept connection")
def test_the_kept_connection_is_reused_and_holds_no_snapshot(store, clock, secret):
    token, value = secret
    read(store, value)
    kept = store.db.connection()
    assert not store.db.is_closed() and store.db.transaction_depth() == 0
    read(store, value)
    assert store.db.connection() is kept, "one connection for this thread's reads, not one per read"
    assert kept.in_transaction is False, "no read transaction left open between reads"
    # another connection writes and checkpoints the whole WAL away: a reader holding a
    # snapshot would make the checkpoint report busy
    other = sqlite3.connect(store.db.database, isolation_level=None)
    try:
        other.execute("UPDATE api_token SET label = 'renamed' WHERE id = ?", (token.id,))
        busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        other.close()
    assert read(store, value).token.label == "renamed"


@pytest.mark.skipif(POSTGRES, reason="SQLite's kept connection")
def test_a_thread_inside_other_work_reads_on_a_worker_thread(store, clock, secret):
    """A thread in the middle of a transaction must not see its own uncommitted writes
    through ``read``, nor have its connection used under it."""
    token, value = secret
    uow = store.uow()
    with uow:
        uow.tokens.revoke(token.id, clock.now())  # not committed yet
        assert read(store, value).token.id == token.id  # read elsewhere: still active there
        assert store.db.transaction_depth() == 1
    # never committed: rolled back when the unit of work ended
    assert not read(store, value).token.revoked


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
    mine = store.db.connection()  # this thread's kept read connection
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
    for connection in (mine, held[0]):  # given back after close: closed, not kept
        assert _closed(connection)
    again = Store(database_url, threads=1)
    try:
        count = again.db.execute_sql("SELECT count(*) FROM partner WHERE name = 'Finished after close'").fetchone()[0]
        assert count == 1
    finally:
        again.close()


@pytest.mark.skipif(POSTGRES, reason="SQLite's kept connection")
def test_rows_are_read_again_only_after_another_connection_commits(store, clock, secret):
    """The kept connection answers a token it read before from memory while ``PRAGMA
    data_version`` says nothing was committed since; any commit elsewhere (another
    connection: another thread, a CLI, another worker process) makes it ask again."""
    token, value = secret
    read(store, value)
    statements = []
    store.db.connection().set_trace_callback(statements.append)
    try:
        assert read(store, value).token.id == token.id
        assert statements == ["PRAGMA data_version"]  # nothing committed: no lookup
        other = sqlite3.connect(store.db.database, isolation_level=None)
        try:
            other.execute("UPDATE api_token SET revoked_at = '2026-01-01 00:00:00+00:00' WHERE id = ?", (token.id,))
        finally:
            other.close()
        statements.clear()
        with pytest.raises(Unauthorized):
            read(store, value)
        assert statements[0] == "PRAGMA data_version" and any("api_token" in s for s in statements[1:])
    finally:
        store.db.connection().set_trace_callback(None)


@pytest.mark.skipif(POSTGRES, reason="SQLite's kept connection")
def test_a_write_on_the_reading_thread_itself_is_seen(store, clock, secret):
    """A commit through the kept connection itself does not change its data_version; such
    work gives the connection back when it ends, and a connection taken again starts with
    nothing remembered."""
    token, value = secret
    read(store, value)
    kept = store.db.connection()
    uow = store.uow()
    with uow:  # this thread: the kept connection, reused for the write
        assert store.db.connection() is kept
        uow.tokens.revoke(token.id, clock.now())
        uow.commit()
    with pytest.raises(Unauthorized):
        read(store, value)


@pytest.mark.skipif(POSTGRES, reason="SQLite's kept connection")
def test_a_connection_given_back_and_taken_again_remembers_nothing(store, clock, secret):
    """The kept connection goes back to the pool (any other work on this thread gives it
    back), another thread writes through that very connection (which its data_version
    does not show), and this thread takes it again without ``read``: the next read must
    not answer from what it remembered."""
    token, value = secret
    read(store, value)
    kept = store.db.connection()
    store.db.close_idle()  # the pool's only idle connection will be the kept one
    store.db.close()  # given back
    took = []

    def other_thread():
        store.db.connect()
        took.append(store.db.connection() is kept)
        store.db.execute_sql("UPDATE api_token SET revoked_at = '2026-01-01 00:00:00+00:00' WHERE id = ?",
                             (token.id,))
        store.db.close()

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert took == [True], "the other thread wrote through the connection this thread had kept"
    store.db.connect()  # taken again, not by read
    assert store.db.connection() is kept
    try:
        with pytest.raises(Unauthorized):
            read(store, value)
    finally:
        store.db.close()


@pytest.mark.skipif(POSTGRES, reason="SQLite's kept connection")
def test_with_every_connection_taken_a_read_waits_off_the_event_loop(store, clock, secret):
    """With the pool empty the read does not wait for a connection on the loop (every
    request of the process would stall): it waits on a worker thread, and the loop runs on."""
    token, value = secret
    store.db.close_idle()
    if not store.db.is_closed():
        store.db.close()
    holders, release = [], threading.Event()

    def hold():
        store.db.connect()
        holders.append(store.db.connection())
        release.wait(10)
        store.db.close()

    threads = []
    while len(store.db._in_use) < store.db._max_connections:  # take every connection there is
        before = len(holders)
        thread = threading.Thread(target=hold)
        thread.start()
        threads.append(thread)
        while len(holders) == before:
            threading.Event().wait(0.01)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        running = asyncio.create_task(ticker())
        threading.Timer(0.5, release.set).start()  # a connection comes free later
        caller = await asyncio.wait_for(store.read(tokens.identify, value), 10)
        running.cancel()
        return caller, ticks

    try:
        caller, ticks = asyncio.run(main())
    finally:
        release.set()
        for thread in threads:
            thread.join(10)
    assert caller.token.id == token.id
    assert ticks >= 10, "the loop ran while the read waited for a connection"
