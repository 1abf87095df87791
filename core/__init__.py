"""The domain of Slipway: entities, rules and use cases, in plain Python.

Nothing here imports falcon, peewee, podman or pluggy. Use cases take the caller, a
unit of work (``ports.storage.UnitOfWork``) and the ports they need, and either return
domain objects or raise one of the errors in ``core.errors``.
"""
