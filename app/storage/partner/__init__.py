"""peewee repositories of the partner API (``ports.storage.partner``)."""
