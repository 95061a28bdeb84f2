"""An episode page's table rows, rendered in Python rather than in the template.

A folder of 100 runs has some 11,000 rows and each row a dozen values, nearly all of
them repeated (a run has a few arms, tasks, categories and outcomes): escaping each
value once per page instead of once per cell is most of what ``view --static`` spends
on its episode pages. The markup is the template's, cell for cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from markupsafe import Markup, escape

from effectbench.viewer.episodes import EpisodeRow

__all__ = ["episode_rows"]


def episode_rows(
    rows: Iterable[EpisodeRow], run: str, query: Callable[..., str], served: bool
) -> Markup:
    """The ``<tr>`` of each row, as the episode page's ``tbody`` holds them."""
    cache: dict[str, str] = {}

    def esc(value: object) -> str:
        text = str(value)
        hit = cache.get(text)
        if hit is None:
            hit = cache[text] = str(escape(text))
        return hit

    out = [_row(row, esc(run), esc, query, served) for row in rows]
    return Markup("".join(out))


def _row(
    e: EpisodeRow, run: str, esc: Callable[[object], str], query: Callable[..., str], served: bool
) -> str:
    ep = esc(e.episode_id)
    if e.drilled:
        first = f'<a class="drill" href="report.html#ep{e.slot}">{ep}</a>'
    elif served:
        link = esc(query({"id": e.episode_id}))
        first = f'<a class="drill" href="episode.html?{link}#ep{e.slot}">{ep}</a>'
    else:
        first = (
            f"<code>{ep}</code> <small>(not sampled into report.html: "
            f"<code>effectbench report {run} --episode {ep}</code>)</small>"
        )
    arm, task, category, outcome = esc(e.arm), esc(e.task_id), esc(e.category), esc(e.outcome)
    return (
        f'<tr data-slot="{e.slot}" data-arm="{arm}" data-task="{task}" '
        f'data-category="{category}" data-outcome="{outcome}"><td>{first}</td><td>{arm}</td>'
        f'<td>{task}</td><td class="num">{e.trial}</td><td>{category}</td>'
        f'<td class="oc">{outcome}</td></tr>\n'
    )
