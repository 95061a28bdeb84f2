"""Generic oracles a provider can reuse to read its system of record.

``effectbench.oracles.sqlite``: every table of a SQLite file, read-only. The PostgreSQL
oracle lives with its server in ``effectbench.postgres`` (``postgres.oracle``);
``effectbench.oracles.postgres`` is its old path.
"""
