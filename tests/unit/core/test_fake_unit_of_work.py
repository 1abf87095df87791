"""The fake unit of work keeps the promises core's use cases rely on (the same ones the
peewee unit of work keeps): writes are seen by others only after commit, a block left
without commit or by an exception leaves nothing, duplicates fail."""
from __future__ import annotations

import pytest

from core.panel.events import Event
from core.panel.customers import PanelCustomer
from tests.support.fakes import FakeUnitOfWork, IntegrityError


def _customer(clock, cid="cust_1", name="Acme"):
    return PanelCustomer(id=cid, name=name, email="", created_at=clock.now())


def test_writes_are_kept_only_by_a_committed_block(uow, clock):
    with uow:
        uow.panel_customers.add(_customer(clock, "cust_1"))
    with uow:
        assert uow.panel_customers.get("cust_1") is None  # left without commit: rolled back
        uow.panel_customers.add(_customer(clock, "cust_2"))
        uow.commit()
    with uow:
        assert uow.panel_customers.get("cust_2") is not None


def test_an_exception_rolls_back_even_after_commit(uow, clock):
    with pytest.raises(RuntimeError):
        with uow:
            uow.panel_customers.add(_customer(clock))
            uow.commit()
            raise RuntimeError("boom")
    with uow:
        assert uow.panel_customers.get("cust_1") is None


def test_another_unit_of_work_sees_writes_only_after_commit(uow, clock):
    other = uow.fork()
    with uow:
        uow.panel_customers.add(_customer(clock))
        with other:
            assert other.panel_customers.get("cust_1") is None
        uow.commit()
    with other:
        assert other.panel_customers.get("cust_1") is not None


def test_commits_apply_only_the_rows_a_block_wrote(uow, clock):
    other = uow.fork()
    with other:
        assert other.panel_customers.get("cust_1") is None  # its snapshot of the table is taken
        with uow:
            uow.panel_customers.add(_customer(clock, "cust_1"))
            uow.commit()
        other.panel_customers.add(_customer(clock, "cust_2"))
        other.commit()
    with uow:  # the later commit did not undo the earlier one
        assert uow.panel_customers.get("cust_1") is not None and uow.panel_customers.get("cust_2") is not None


def test_events_are_published_only_on_commit(uow):
    event = Event("service.status", {"id": "svc_1", "status": "running"}, "svc_1")
    with uow:
        uow.emit(event)
    assert uow.published == []
    with uow:
        uow.emit(event)
        uow.commit()
    assert uow.published == [event]


def test_duplicates_and_nesting_fail(uow, clock):
    with uow:
        uow.panel_customers.add(_customer(clock))
        with pytest.raises(IntegrityError):
            uow.panel_customers.add(_customer(clock))
        with pytest.raises(RuntimeError, match="re-entrant"):
            with uow:
                pass


def test_human_ids_count_on_and_a_rollback_gives_the_number_back(uow):
    with uow:
        assert uow.human_ids.next("C") == "C-1001"
    with uow:
        assert uow.human_ids.next("C") == "C-1001"
        assert uow.human_ids.next("C") == "C-1002"
        assert uow.human_ids.next("L") == "L-1001"
        uow.commit()
    with uow:
        assert uow.human_ids.next("C") == "C-1003"


def test_a_fresh_fake_is_empty():
    fresh = FakeUnitOfWork()
    with fresh:
        assert fresh.partners.all_ids() == [] and fresh.routes.all() == []
