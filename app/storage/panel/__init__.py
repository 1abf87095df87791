"""peewee repositories of the panel API (``ports.storage.panel``)."""
