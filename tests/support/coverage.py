"""Contract coverage: every operation of both contracts called by an API test, and seen
succeeding at least once. Checked at the end of a session that ran the whole API suite
(``pytest_sessionfinish`` in ``tests/api/conftest.py``)."""
from __future__ import annotations

from pathlib import Path

from app.http.openapi import ApiContract

#: WebSocket operations (x-slipway-websocket) a plain request can only refuse (400 asks for the
#: upgrade); their upgrades succeed in tests/e2e/test_realtime.py, against a real server
WEBSOCKET_ONLY = {"openRealtimeChannel"}
#: operations that need containers: they succeed in tests/integration/test_services_engine.py,
#: against the same contract
ENGINE_BACKED = {"startService", "stopService", "restartService", "redeployService", "deleteService",
                 "getServiceLogs"}


def whole_suite_ran(session, folder: Path) -> bool:
    """Every test module under ``folder`` was collected and run, with no -k or -m selection."""
    collected = {Path(str(item.path)).resolve() for item in session.items}
    modules = {p.resolve() for p in folder.rglob("test_*.py")}
    option = session.config.option
    return (bool(modules) and modules <= collected and not option.keyword and not option.markexpr
            and not getattr(option, "collectonly", False))


def coverage_problems(exercised: dict, contracts: dict | None = None) -> list[str]:
    """What the run left uncovered, as sentences; empty when every operation was called and
    (but for the engine-backed and WebSocket-only ones) seen answering below 400.
    ``exercised``: ``{(api, operationId): {status, ...}}``; ``contracts``: ``{api: ApiContract}``
    (default: both served contracts)."""
    contracts = contracts or {api: ApiContract.load(api) for api in ("partner", "panel")}
    problems = []
    missing = [(api, op.operation_id) for api, contract in contracts.items() for op in contract.operations
               if (api, op.operation_id) not in exercised]
    if missing:
        problems.append(f"contract operations no API test called: {missing}")
    never_ok = [key for key, statuses in exercised.items()
                if not any(s < 400 for s in statuses) and key[1] not in ENGINE_BACKED | WEBSOCKET_ONLY]
    if never_ok:
        problems.append(f"operations never seen succeeding: {never_ok}")
    # an operation that is only a WebSocket must be listed above (and so tested end to end)
    upgrades = {op.operation_id for op in contracts.get("panel", ApiContract.load("panel")).operations if op.websocket}
    if not WEBSOCKET_ONLY <= upgrades:
        problems.append(f"not WebSocket operations: {WEBSOCKET_ONLY - upgrades}")
    return problems
