"""A job's cancel switch and its budgets: the one mechanism that bounds every step that
runs a customer's code or reads a customer's data (a deploy's cancel; a backup's, a
restore's and a verification's time and size).

:class:`CancelEvent` is a ``threading.Event`` with the reason it was set. The engine
calls that stream (``ports.runtime``'s ``exec_output``, ``export_volume``) take it as
``cancel`` and close their engine response once it is set, so a thread blocked reading a
stream that never ends wakes up and raises. :class:`Budget` adds a time and a size
budget: whoever runs the job sets it off at its deadline (``expire()``, from a timer:
core keeps no clock of its own), and :meth:`Budget.count` counts the bytes read over the
chunks that pass through it, so past either budget the job stops with a reason that
names the setting. :class:`Budgeted` hands a runtime's streams to a budget.
"""
from __future__ import annotations

import threading

DELETED = "service deleted"  # a job whose service was deleted meanwhile ends with this
MB = 1024 * 1024


class OverBudget(Exception):
    """The job's budget was spent or it was cancelled; the message is the reason."""


class CancelEvent(threading.Event):
    """A job's cancel event; ``reason`` says why it was set (the first reason wins)."""

    reason: str | None = None

    def cancel(self, reason: str) -> None:
        if not self.is_set():
            self.reason = reason
            self.set()


class Budget(CancelEvent):
    """A time budget of ``seconds`` and a size budget of ``max_bytes`` read, named by the
    settings ``time_setting`` and ``size_setting`` in the reasons."""

    def __init__(self, *, seconds: float, max_bytes: int, time_setting: str = "SLIPWAY_BACKUP_TIMEOUT",
                 size_setting: str = "SLIPWAY_BACKUP_MAX_MB"):
        super().__init__()
        self.seconds, self.max_bytes = float(seconds), int(max_bytes)
        self.time_setting, self.size_setting = time_setting, size_setting
        self.read = 0
        self._lock = threading.Lock()

    def expire(self) -> None:
        """The time budget is spent (called by the job's timer)."""
        self.cancel(f"took longer than {self.time_setting} ({self.seconds:g} s)")

    def check(self) -> None:
        """Raise :class:`OverBudget` with the reason once the budget is spent or cancelled."""
        if self.is_set():
            raise OverBudget(self.reason or "cancelled")

    def spend(self, size: int) -> None:
        """Count ``size`` bytes read; past ``max_bytes`` the budget is spent."""
        with self._lock:
            self.read += size
            over = self.read > self.max_bytes
        if over:
            self.cancel(f"read more than {self.size_setting} ({self.max_bytes / MB:g} MB)")
        self.check()

    def count(self, chunks):
        """``chunks`` as they come, counted; :class:`OverBudget` past either budget (the
        iteration of ``chunks`` is then closed)."""
        iterator = iter(chunks)
        try:
            for chunk in iterator:
                self.check()
                self.spend(len(chunk))
                yield chunk
            self.check()
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def failure(self, exc: Exception) -> str | None:
        """The reason a job that raised ``exc`` failed, when the budget is why (spent or
        cancelled meanwhile); None otherwise."""
        if isinstance(exc, OverBudget) or self.is_set():
            return self.reason or str(exc)
        return None


class Budgeted:
    """A runtime whose streams (commands' output, volume archives) are counted against
    ``budget`` and closed when it is spent or cancelled; every other call is the
    runtime's."""

    def __init__(self, runtime, budget: Budget):
        self._runtime, self.budget = runtime, budget

    def __getattr__(self, name):
        return getattr(self._runtime, name)

    def exec_output(self, container_id: str, argv, env=None, user: str | None = None):
        self.budget.check()
        return self.budget.count(self._runtime.exec_output(container_id, argv, env, user, cancel=self.budget))

    def exec_run(self, container_id: str, argv, env=None, user: str | None = None) -> bytes:
        out = b""
        for chunk in self.exec_output(container_id, argv, env, user):
            out = (out + chunk)[-4096:]
        return out

    def exec_input(self, container_id: str, argv, chunks, size: int, env=None, user: str | None = None) -> bytes:
        self.budget.check()
        return self._runtime.exec_input(container_id, argv, chunks, size, env, user, cancel=self.budget)

    def export_volume(self, name: str):
        self.budget.check()
        return self.budget.count(self._runtime.export_volume(name, cancel=self.budget))
