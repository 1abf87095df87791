"""The composition root and driving adapters: the Falcon ASGI app, its HTTP resources,
the CLI, configuration, the OpenAPI contracts and the peewee storage adapter."""


def create_app(config=None):
    """Build the ASGI app (see :func:`app.factory.create_app`)."""
    from app.factory import create_app as _create_app

    return _create_app(config)
