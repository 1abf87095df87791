"""Panel API surface of the foundation: its contract, its error format."""
import yaml


def test_panel_contract_lists_the_loaded_deploy_methods(client):
    result = client.get("/api/openapi.yaml", expect=200)
    document = yaml.safe_load(result.text)
    assert document["openapi"] == "3.1.0"
    assert document["components"]["schemas"]["DeployMethod"]["enum"] == ["ai", "compose", "git", "template"]


def test_unknown_panel_routes_and_methods_use_the_panel_format(client):
    for path in ["/api/nope", "/api", "/", "/favicon.ico"]:
        result = client.get(path, expect=404)
        assert result.json == {"error": {"code": "not_found", "message": "no such route"}}
    result = client.post("/api/openapi.yaml", expect=405)
    assert result.json["error"]["code"] == "method_not_allowed"
