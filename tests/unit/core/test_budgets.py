"""A job's budget (``core.panel.budgets``): the bytes counted over the chunks that pass,
the reasons naming the settings, and a cancel (a deleted service) that stops the count."""
from __future__ import annotations

import pytest

from core.panel.budgets import DELETED, MB, Budget, Budgeted, OverBudget


def _budget(**kw):
    return Budget(**{"seconds": 5, "max_bytes": MB, **kw})


def test_past_the_size_budget_the_count_stops_and_closes_the_stream():
    closed = []

    def stream():
        try:
            while True:
                yield b"x" * 4096
        finally:
            closed.append(True)

    budget = _budget()
    with pytest.raises(OverBudget, match=r"^read more than SLIPWAY_BACKUP_MAX_MB \(1 MB\)$"):
        for _ in budget.count(stream()):
            pass
    assert closed == [True] and budget.is_set() and budget.read == MB + 4096
    assert budget.failure(RuntimeError("what the writer saw")) == "read more than SLIPWAY_BACKUP_MAX_MB (1 MB)"


def test_a_spent_time_budget_or_a_delete_stops_the_next_chunk_with_its_reason():
    budget = _budget(seconds=2.5)
    chunks = budget.count(iter([b"a", b"b"]))
    assert next(chunks) == b"a"
    budget.expire()
    with pytest.raises(OverBudget, match=r"^took longer than SLIPWAY_BACKUP_TIMEOUT \(2\.5 s\)$"):
        next(chunks)
    budget.cancel(DELETED)  # the first reason stays
    assert budget.reason == "took longer than SLIPWAY_BACKUP_TIMEOUT (2.5 s)"
    deleted = _budget()
    deleted.cancel(DELETED)
    with pytest.raises(OverBudget, match="service deleted"):
        deleted.check()
    assert _budget().failure(RuntimeError("x")) is None  # not the budget's doing


class _Streams:
    def __init__(self):
        self.cancels = []

    def exec_output(self, container_id, argv, env=None, user=None, *, cancel=None):
        self.cancels.append(cancel)
        return iter([b"12", b"345"])

    def export_volume(self, name, *, cancel=None):
        self.cancels.append(cancel)
        return iter([b"tar"])

    def containers(self, service_id):
        return ["c"]


def test_a_budgeted_runtime_counts_its_streams_and_hands_them_the_budget():
    budget, streams = _budget(), _Streams()
    runtime = Budgeted(streams, budget)
    assert runtime.exec_run("c", ["dump"]) == b"12345"
    assert b"".join(runtime.export_volume("v")) == b"tar"
    assert budget.read == 8 and streams.cancels == [budget, budget]
    assert runtime.containers("svc") == ["c"]  # other calls are the runtime's
    budget.cancel(DELETED)
    with pytest.raises(OverBudget, match="service deleted"):
        runtime.exec_output("c", ["dump"])
