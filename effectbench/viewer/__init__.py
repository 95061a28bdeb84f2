"""``effectbench view``: every run under a folder, served on 127.0.0.1 or written as pages.

One job per module: ``paths.py`` (an untrusted URL path to a file inside the folder, or
nothing), ``runs.py`` (the runs found and each one's row, read from its own artifacts),
``episodes.py`` (a run's episodes from results.jsonl, filtered), ``pages.py`` (the index
and episode pages), ``app.py`` (the read-only ASGI app of ``--serve``) and ``static.py``
(the pages of ``--static``). docs/viewer.md is the user's page.
"""
