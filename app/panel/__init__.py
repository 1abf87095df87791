"""The panel services API (``/api``): its gate, handlers, browser login, docs, real-time
WebSockets, resource usage and the event bus."""
