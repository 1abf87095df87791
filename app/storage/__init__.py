"""The peewee storage adapter: connection, models, migrations and the unit of work."""
