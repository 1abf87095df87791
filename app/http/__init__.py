"""HTTP plumbing shared by both APIs: routes and pipelines from the OpenAPI contracts
(``contracts/*.yaml``, read by ``openapi``), error mapping, client addresses, timestamps."""
