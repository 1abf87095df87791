"""The domain of Slipway: entities, rules and use cases, in plain Python.

Nothing here imports falcon, peewee, podman or pluggy. Use cases take the caller, a
unit of work (``ports.storage.UnitOfWork``) and the ports they need, and either return
domain objects or raise one of the errors in ``core.errors``.

``core.partner`` is the partner licensing domain, ``core.panel`` the panel services
domain (with ``core.panel.compose``, the deploy-plan language); neither imports the
other. What both use (``errors``, ``ratelimit``) sits at the top.
"""
