"""peewee models, defined per database (no module-level binding), one class per table:
the partner API's in ``partner``, the panel API's in ``panel``, the infrastructure both
use in ``shared``; ``define_models`` makes them all on one database."""
from __future__ import annotations

from types import SimpleNamespace

import peewee

from app.storage.models import panel, partner, shared
from app.storage.models.base import UtcDateTimeField
from app.storage.readpath import Statements

__all__ = ["UtcDateTimeField", "define_models"]


def define_models(db: peewee.Database, statements: Statements | None = None) -> SimpleNamespace:
    """Every model on ``db``, and ``statements``, the SQL of the reads on every request
    (``Statements``; one of its own by default)."""
    class Base(peewee.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class SchemaVersion(Base):
        version = peewee.IntegerField(primary_key=True)
        description = peewee.TextField()
        applied_at = UtcDateTimeField()

        class Meta:
            table_name = "slipway_schema"

    return SimpleNamespace(statements=statements or Statements(db), SchemaVersion=SchemaVersion, **partner.define(Base),
                           **panel.define(Base), **shared.define(Base))
