"""Generic oracles a provider can reuse to read its system of record.

``effectbench.oracles.sqlite``: every table of a SQLite file, read-only.
``effectbench.oracles.postgres``: every table of a PostgreSQL database, read-only.
"""
