"""Operations, one module per concern: request ids and the access log (``observer``:
``Observer``), secret-free JSON or text logs (``logs``: the formatters and ``log_config``)
and Prometheus metrics (``prometheus``: ``metrics()``, ``render_metrics``,
``worker_exiting``). What is secret in a line is ``core.redaction.redact``'s to say."""
