"""A PostgreSQL system of record, in one package: where its server comes from, one run's
databases on it, the episode databases reused between episodes, the read-only oracle and
the mutation audit's write handle.

``server``: ``EmbeddedServer`` (the harness's own) or the user's, checked by
``check_server``; ``PgConfigError``. ``databases``: ``PgRun``, a run's oracle role,
template and cloned episode databases. ``pool``: ``DatabasePool``, clones reset to the
template between episodes. ``oracle``: ``PostgresOracle``, every table read in one
snapshot. ``store``: ``PostgresStore``. Nothing is imported here: psycopg loads only with
the module that needs it.
"""
