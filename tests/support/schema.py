"""A database's schema as the database itself reports it (SQLite's pragmas, PostgreSQL's
catalog), in one comparable shape: ``{table: {"columns": ..., "indexes": ...,
"constraints": ..., "triggers": ...}}``. Column order is left out (a column a migration
adds comes last; no query depends on the order)."""
from __future__ import annotations

import re

import peewee


def schema_of(db: peewee.Database) -> dict:
    if isinstance(db, peewee.PostgresqlDatabase):
        return _postgres(db)
    return _sqlite(db)


def _rows(db, sql, params=()):
    return db.execute_sql(sql, params).fetchall()


def _sqlite(db) -> dict:
    schema = {}
    tables = [name for (name,) in _rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    for table in tables:
        columns = {name: {"type": type_.upper(), "not_null": bool(notnull) or pk > 0,
                          "default": dflt, "primary_key": pk}
                   for _cid, name, type_, notnull, dflt, pk in _rows(db, f'PRAGMA table_info("{table}")')}
        indexes = {}
        for _seq, name, unique, origin, partial in _rows(db, f'PRAGMA index_list("{table}")'):
            cols = tuple(col for _n, _cid, col in sorted(_rows(db, f'PRAGMA index_info("{name}")')))
            where = None
            if partial:
                (sql,) = _rows(db, "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,))[0]
                where = _squash(re.split(r"\bWHERE\b", sql, maxsplit=1, flags=re.I)[1])
            if origin != "c":  # made by the table's own PRIMARY KEY / UNIQUE: named by SQLite
                name = f"({origin}) {','.join(cols)}"
            indexes[name] = {"columns": cols, "unique": bool(unique), "where": where}
        foreign_keys = {}
        for _id, _seq, ref, col, ref_col, on_update, on_delete, _match in _rows(
                db, f'PRAGMA foreign_key_list("{table}")'):
            foreign_keys[col] = {"references": f"{ref}({ref_col})", "on_update": on_update, "on_delete": on_delete}
        triggers = {name: _squash(sql) for name, sql in _rows(
            db, "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,))}
        schema[table] = {"columns": columns, "indexes": indexes, "foreign_keys": foreign_keys,
                         "triggers": triggers}
    return schema


def _squash(sql: str) -> str:
    return " ".join(sql.split()).strip()


def _postgres(db) -> dict:
    """(Names are given without the schema they are in, so that two schemas compare.)"""
    (current,) = _rows(db, "SELECT current_schema()")[0]
    unqualified = re.compile(rf'\b"?{re.escape(current)}"?\.')
    return {table: _strip(parts, unqualified) for table, parts in _postgres_qualified(db).items()}


def _strip(value, pattern):
    if isinstance(value, dict):
        return {key: _strip(item, pattern) for key, item in value.items()}
    return pattern.sub("", value) if isinstance(value, str) else value


def _postgres_qualified(db) -> dict:
    schema = {}
    tables = [name for (name,) in _rows(db, "SELECT table_name FROM information_schema.tables WHERE "
                                            "table_schema = current_schema() AND table_type = 'BASE TABLE' "
                                            "ORDER BY table_name")]
    for table in tables:
        columns = {name: {"type": data_type + (f"({length})" if length else ""), "not_null": nullable == "NO",
                          "default": default}
                   for name, data_type, length, nullable, default in _rows(
                       db, "SELECT column_name, data_type, character_maximum_length, is_nullable, column_default "
                           "FROM information_schema.columns WHERE table_schema = current_schema() "
                           "AND table_name = %s", (table,))}
        indexes = {name: {"definition": definition} for name, definition in _rows(
            db, "SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x "
                "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
                "WHERE t.relname = %s AND t.relnamespace = current_schema()::regnamespace", (table,))}
        constraints = {name: definition for name, definition in _rows(
            db, "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = (current_schema() || '.' || quote_ident(%s))::regclass", (table,))}
        triggers = {name: definition for name, definition in _rows(
            db, "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal "
                "AND tgrelid = (current_schema() || '.' || quote_ident(%s))::regclass", (table,))}
        schema[table] = {"columns": columns, "indexes": indexes, "constraints": constraints,
                         "triggers": triggers}
    # the trigger functions (plpgsql), under a name no table can have
    schema["(functions)"] = {name: definition for name, definition in _rows(
        db, "SELECT proname, pg_get_functiondef(oid) FROM pg_proc "
            "WHERE pronamespace = current_schema()::regnamespace")}
    return schema


def differences(left: dict, right: dict, path: str = "") -> list[str]:
    """Where two schemas (or parts of them) differ, one line each."""
    if isinstance(left, dict) and isinstance(right, dict):
        lines = []
        for key in sorted(set(left) | set(right), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in right:
                lines.append(f"{where}: only on the left: {left[key]!r}")
            elif key not in left:
                lines.append(f"{where}: only on the right: {right[key]!r}")
            else:
                lines.extend(differences(left[key], right[key], where))
        return lines
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]
