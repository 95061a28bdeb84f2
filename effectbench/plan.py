"""Old import path, kept so existing imports work: the code lives in `effectbench.run.plan`."""

from effectbench.run.plan import *
from effectbench.run.plan import RESOLVE_CACHE_MAX, hash_identity  # noqa: F401
