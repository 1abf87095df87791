"""The operator's command line: ``main`` (the ``slipway`` entry point), ``commands`` (what
each command does) and ``demo`` (``python -m app.cli.demo``)."""
