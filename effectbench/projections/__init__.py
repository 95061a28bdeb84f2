"""Pure projections over the event log: episodes now; metrics and cells build on them."""

from effectbench.projections.episodes import (
    EventLike,
    ProjectionError,
    fold_episode,
    project_episodes,
)

__all__ = ["EventLike", "ProjectionError", "fold_episode", "project_episodes"]
