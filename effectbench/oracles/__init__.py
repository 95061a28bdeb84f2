"""Generic oracles for systems of record a provider does not read itself.

``effectbench.oracles.postgres``: every table of a PostgreSQL database, read-only.
(The SQLite one is ``effectbench.sql_oracle``.)
"""
