"""The tables of the relational stores, described once: SQLite's DDL and the SQL
store's SQLAlchemy tables are both derived from here.

Standard library only: the SQLite store must not need SQLAlchemy (an extra).
:mod:`.sqlite` renders these as SQLite DDL (:func:`sqlite_table`);
:mod:`.sql_schema` builds SQLAlchemy tables from them (prefixed ``a2a_``).

Both stores keep the same coordination tables (events, leases, push targets,
claims) and the same task columns; they differ where their engines do:

* SQLite keeps a task's snapshot in a table of its own (:data:`SQLITE_SNAPSHOTS`):
  it rewrites a whole row on any update, and a task's row changes with every
  append while its snapshot changes only now and then.  It also counts the
  bytes behind its lazy snapshots (:data:`SQLITE_SIZES`).
* The SQL store keeps the snapshot in the task's row (:data:`SQL_TASK_EXTRA`).

Column kinds: ``key`` (short text that identifies or orders things, compared
byte for byte; ``length`` bounds it on the SQL databases), ``text`` (short text),
``body`` (JSON text of any size), ``int``, ``real`` (a double) and ``bool``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

#: The longest id the server accepts (see ``engine.service.MAX_ID_LENGTH``).
ID_LENGTH = 256


@dataclass(frozen=True)
class Column:
    """One column: its name, kind (see the module docstring) and constraints."""

    name: str
    kind: str
    length: int = 0
    nullable: bool = False
    primary: bool = False
    #: A literal default (SQLite only: columns added to files of earlier releases).
    default: Optional[str] = None


@dataclass(frozen=True)
class Table:
    """A table: its columns in order, and whether SQLite keeps it ``WITHOUT ROWID``
    (tables whose primary key is the whole point of the row)."""

    name: str
    columns: Tuple[Column, ...]
    without_rowid: bool = False

    @property
    def primary_key(self) -> Tuple[str, ...]:
        return tuple(column.name for column in self.columns if column.primary)


@dataclass(frozen=True)
class Index:
    """An index on ``table``'s ``columns``; ``descending`` ones are newest first
    where the store can say so (SQLite)."""

    name: str
    table: str
    columns: Tuple[str, ...]
    descending: Tuple[str, ...] = ()


def _key(name: str, length: int, *, primary: bool = False) -> Column:
    return Column(name, "key", length, primary=primary)


#: The columns of a task's row on every relational store.
TASK_COLUMNS = (
    _key("id", ID_LENGTH, primary=True),
    _key("tenant", 255),
    _key("owner", 255),
    Column("dialect", "text", 16),
    _key("context_id", ID_LENGTH),
    Column("state", "text", 32),
    _key("created_at", 32),
    _key("updated_at", 32),
    # The log's last sequence number: the compare-and-set of every append.
    Column("seq", "int"),
    # The snapshot is the task as of snap_seq; later events are folded in on load.
    Column("snap_seq", "int"),
)

#: What the SQL store's task rows add: the history's length as the runtime trimmed
#: it, and the snapshot itself.
SQL_TASK_EXTRA = (
    Column("history_len", "int"),
    Column("snapshot", "body"),
)

#: What SQLite's task rows add, for :func:`~.base.snapshot_due` counting bytes: the
#: stored snapshot's length, the length of the events logged since it, and the
#: history's length as the runtime trimmed it (NULL: untrimmed, as in a row written
#: before, whose snapshot was stored with every such change).
SQLITE_SIZES = (
    Column("snap_bytes", "int", default="0"),
    Column("log_bytes", "int", default="0"),
    Column("history_len", "int", nullable=True),
)

#: SQLite's snapshots, apart from the task rows (see the module docstring).
SQLITE_SNAPSHOTS = Table("snapshots", (
    _key("task_id", ID_LENGTH, primary=True),
    Column("snapshot", "body"),
))

#: The tables both stores share after the tasks (and, on SQLite, the snapshots).
EVENTS = Table("events", (
    _key("task_id", ID_LENGTH, primary=True),
    Column("seq", "int", primary=True),
    Column("event", "body"),
), without_rowid=True)
LEASES = Table("leases", (
    _key("task_id", ID_LENGTH, primary=True),
    _key("owner", 255),
    Column("expires", "real"),
), without_rowid=True)
PUSH_TARGETS = Table("push_targets", (
    _key("task_id", ID_LENGTH, primary=True),
    _key("id", ID_LENGTH, primary=True),
    Column("position", "int"),
    Column("target", "body"),
    Column("delivered_seq", "int"),
    Column("failures", "int"),
    Column("gave_up", "bool"),
), without_rowid=True)
CLAIMS = Table("claims", (
    _key("key", ID_LENGTH + 64, primary=True),
    _key("owner", 255),
    Column("expires", "real"),
), without_rowid=True)
SHARED_TABLES = (EVENTS, LEASES, PUSH_TARGETS, CLAIMS)

#: ListTasks reads a caller's tasks newest first.
TASKS_BY_UPDATE = Index("tasks_by_update", "tasks", ("tenant", "owner", "updated_at", "id"),
                        descending=("updated_at", "id"))

SQL_TASKS = Table("tasks", TASK_COLUMNS + SQL_TASK_EXTRA)
SQLITE_TASKS = Table("tasks", TASK_COLUMNS + SQLITE_SIZES)

# ------------------------------------------------------------ SQLite DDL

_SQLITE_TYPES = {"key": "TEXT", "text": "TEXT", "body": "TEXT", "int": "INTEGER",
                 "real": "REAL", "bool": "INTEGER"}


def sqlite_column(column: Column, *, inline_key: bool = False) -> str:
    """A column's SQLite definition (``inline_key``: it is the table's one-column key)."""
    parts = [column.name, _SQLITE_TYPES[column.kind]]
    if inline_key:
        parts.append("PRIMARY KEY")
    elif not column.nullable:
        parts.append("NOT NULL")
    if column.default is not None:
        parts.append(f"DEFAULT {column.default}")
    return " ".join(parts)


def sqlite_table(table: Table, name: Optional[str] = None) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for ``table`` (under ``name``, if given)."""
    key = table.primary_key
    lines = [sqlite_column(column, inline_key=key == (column.name,))
             for column in table.columns]
    if len(key) > 1:
        lines.append(f"PRIMARY KEY ({', '.join(key)})")
    body = ",\n    ".join(lines)
    rowid = " WITHOUT ROWID" if table.without_rowid else ""
    return f"CREATE TABLE IF NOT EXISTS {name or table.name} (\n    {body}\n){rowid};\n"


def sqlite_index(index: Index) -> str:
    """``CREATE INDEX IF NOT EXISTS`` for ``index``."""
    columns = ", ".join(f"{c} DESC" if c in index.descending else c for c in index.columns)
    return f"CREATE INDEX IF NOT EXISTS {index.name} ON {index.table} ({columns});\n"
