"""The episode page's rows, rendered in Python for speed, are the template's markup:
checked against the row template they replaced, on hostile values."""

from __future__ import annotations

import jinja2
from hypothesis import given
from hypothesis import strategies as st

from effectbench.viewer.episodes import EpisodeRow
from effectbench.viewer.pages import _query
from effectbench.viewer.rows import episode_rows

ROW_TEMPLATE = (
    "{% for e in rows %}\n"
    '<tr data-slot="{{ e.slot }}" data-arm="{{ e.arm }}" data-task="{{ e.task_id }}" '
    'data-category="{{ e.category }}" data-outcome="{{ e.outcome }}"><td>{% if e.drilled %}'
    '<a class="drill" href="report.html#ep{{ e.slot }}">{{ e.episode_id }}</a>{% elif served %}'
    '<a class="drill" href="episode.html?{{ query({\'id\': e.episode_id}) }}#ep{{ e.slot }}">'
    "{{ e.episode_id }}</a>{% else %}<code>{{ e.episode_id }}</code> <small>(not sampled into "
    "report.html: <code>effectbench report {{ run }} --episode {{ e.episode_id }}</code>)"
    '</small>{% endif %}</td><td>{{ e.arm }}</td><td>{{ e.task_id }}</td><td class="num">'
    '{{ e.trial }}</td><td>{{ e.category }}</td><td class="oc">{{ e.outcome }}</td></tr>\n'
    "{% endfor %}\n"
)
"""The loop the episode page's template held before, in the report's environment
(effectbench.report.render: autoescape, trim_blocks, lstrip_blocks)."""

_TEMPLATE = jinja2.Environment(
    autoescape=True, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
).from_string(ROW_TEMPLATE)
hostile = st.text(alphabet=st.sampled_from("ab<>&\"'=?# /é\n"), max_size=12)
rows = st.builds(
    EpisodeRow,
    slot=st.integers(0, 10**6),
    episode_id=hostile,
    arm=hostile,
    task_id=hostile,
    trial=st.integers(-1, 50),
    category=hostile,
    outcome=hostile,
    drilled=st.booleans(),
)


@given(st.lists(rows, max_size=6), hostile, st.booleans())
def test_rows_are_the_templates_markup(some: list[EpisodeRow], run: str, served: bool) -> None:
    expected = _TEMPLATE.render(rows=some, run=run, served=served, query=_query)
    assert episode_rows(some, run, _query, served) == expected


def test_a_value_is_escaped_in_every_cell() -> None:
    row = EpisodeRow(1, '<x id="e">', "<arm>", "t&1", 0, "C1", '"SWER"', False)
    html = episode_rows([row], "runs/<a>", _query, served=False)
    assert "<arm>" not in html and "<x" not in html and "<a>" not in html
    assert html.count("&lt;arm&gt;") == 2 and "t&amp;1" in html and "runs/&lt;a&gt;" in html
