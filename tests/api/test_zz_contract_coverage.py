"""Meta-tests: the contracts are valid OpenAPI, and every operation in them was called by
an API test in this run (runs last; checked only when the whole API suite ran)."""
from pathlib import Path

import pytest
import yaml
from openapi_spec_validator import validate

from app.contract import Contract
from tests.contract_client import EXERCISED

HERE = Path(__file__).parent
#: WebSocket operations (x-slipway-websocket) a plain request can only refuse (400 asks for the
#: upgrade); their upgrades succeed in tests/e2e/test_realtime.py, against a real server
WEBSOCKET_ONLY = {"openRealtimeChannel"}
ENGINE_BACKED = {"startService", "stopService", "restartService", "redeployService", "deleteService",
                 "getServiceLogs"}


@pytest.mark.parametrize("api", ["partner", "panel"])
def test_contracts_are_valid_openapi(api):
    contract = Contract.load(api, deploy_methods=["template", "compose", "git", "ai"])
    validate(yaml.safe_load(contract.text))


def test_every_operation_has_an_api_test(request):
    ran_files = {Path(str(item.path)).name for item in request.session.items}
    all_files = {p.name for p in HERE.glob("test_*.py")}
    option = request.config.option
    if not all_files <= ran_files or option.keyword or option.markexpr:
        pytest.skip("only meaningful when the whole API suite runs")
    missing = [(api, op.operation_id) for api in ("partner", "panel") for op in Contract.load(api).operations
               if (api, op.operation_id) not in EXERCISED]
    assert not missing, f"contract operations no API test called: {missing}"
    # and every operation was seen succeeding (2xx, or 3xx: the login flow) at least once; those that need containers
    # succeed in tests/integration/test_services_engine.py, against the same contract
    never_ok = [key for key, statuses in EXERCISED.items()
                if not any(s < 400 for s in statuses) and key[1] not in ENGINE_BACKED | WEBSOCKET_ONLY]
    assert not never_ok, f"operations never seen succeeding: {never_ok}"
    # an operation that is only a WebSocket must be listed above (and so tested end to end)
    upgrades = {op.operation_id for op in Contract.load("panel").operations if op.websocket}
    assert WEBSOCKET_ONLY <= upgrades, f"not WebSocket operations: {WEBSOCKET_ONLY - upgrades}"
