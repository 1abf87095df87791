"""peewee models, defined per database (no module-level binding), one class per table."""
from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import peewee


class UtcDateTimeField(peewee.DateTimeField):
    """Stores naive UTC, hands back aware UTC datetimes."""

    def db_value(self, value):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return super().db_value(value)

    def python_value(self, value):
        value = super().python_value(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


def define_models(db: peewee.Database) -> SimpleNamespace:
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

    class Partner(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        name = peewee.TextField()
        type = peewee.CharField(max_length=16)
        parent = peewee.ForeignKeyField("self", null=True, backref="children", column_name="parent_id",
                                        on_delete="RESTRICT")
        created_at = UtcDateTimeField()

    class ApiToken(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        label = peewee.TextField()
        token_prefix = peewee.CharField(max_length=8)
        token_hash = peewee.CharField(max_length=64, unique=True)
        scope = peewee.CharField(max_length=8)
        created_by = peewee.CharField(max_length=36, null=True)
        created_at = UtcDateTimeField()
        last_used_at = UtcDateTimeField(null=True)
        revoked_at = UtcDateTimeField(null=True)

        class Meta:
            table_name = "api_token"
            indexes = ((("partner", "created_at"), False),)

    class Contract(Base):
        id = peewee.CharField(max_length=36, primary_key=True)
        partner = peewee.ForeignKeyField(Partner, column_name="partner_id", on_delete="RESTRICT")
        model = peewee.CharField(max_length=64)
        currency = peewee.CharField(max_length=3)
        unit_price_cents = peewee.BigIntegerField()
        created_at = UtcDateTimeField()

    return SimpleNamespace(SchemaVersion=SchemaVersion, Partner=Partner, ApiToken=ApiToken, Contract=Contract)
