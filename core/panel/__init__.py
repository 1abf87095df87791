"""The panel services domain: access (API keys), sessions, customers, services,
deploys, backups, routes, events, containers, worker leases and the compose language."""
