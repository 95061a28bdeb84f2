"""summary.md: the run's headline, cells, tasks and comparisons as Markdown, from the
manifest and metrics alone (a jinja2 template in the package), so a rescore rebuilds it
byte for byte."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from effectbench.outputs.signals import run_warnings
from effectbench.projections.claims import FIXTURE_LEAD, MIN_TRIALS_PER_TASK, fixture_body
from effectbench.projections.substrates import SUBSTRATE_COLUMNS, substrate_rows

__all__ = ["render_summary"]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _interval(block: Mapping[str, Any], fmt: Callable[[float], str]) -> str:
    """`` [lo, hi]`` of the block's ci95 in ``fmt``; empty when there is none."""
    ci = block.get("ci95")
    return "" if ci is None else f" [{fmt(ci[0])}, {fmt(ci[1])}]"


def _rate(block: Mapping[str, Any]) -> str:
    interval = _interval(block, _pct)
    return f"{block['numerator']}/{block['denominator']} {_pct(block.get('rate'))}{interval}"


def _gap(block: Mapping[str, Any]) -> str:
    if block.get("value") is None:
        return "n/a"
    interval = _interval(block, _signed)
    return (
        f"{block['screen_success']}/{block['denominator']} - "
        f"{block['task_success']}/{block['denominator']} = {_signed(block['value'])}{interval} "
        "(paired)"
    )


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} pp"


def _clustered(block: Mapping[str, Any]) -> str:
    ci = block.get("ci95")
    if block.get("mean") is None:
        return "n/a"
    if ci is None:
        return f"{block['mean']:.3f} (interval needs >= 2 episodes)"
    return f"{block['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] over {block['n_clusters']} tasks"


def _prefix(block: Mapping[str, Any]) -> str:
    interval = _interval(block, _pct)
    return (
        f"{block['successes']}/{block['eligible_tasks']} {_pct(block.get('value'))}{interval}, "
        f"coverage {block['eligible_tasks']}/{block['total_tasks']}"
    )


def _est(block: Mapping[str, Any]) -> str:
    if block.get("value") is None:
        return "n/a"
    return f"{block['value']:.3f}{_interval(block, lambda x: f'{x:.3f}')}"


def _diff(block: Mapping[str, Any]) -> str:
    if block.get("difference") is None:
        return "n/a"
    return f"{_signed(block['difference'])}{_interval(block, _signed)}"


def _p(x: float) -> str:
    return f"{x:.4g}"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _frac(block: Mapping[str, Any]) -> str:
    """A rate as its bare count, for tables too narrow for intervals."""
    return f"{block['numerator']}/{block['denominator']}"


def _ks(block: Mapping[str, Any]) -> list[str]:
    return sorted(block, key=int)


def _by_substrate(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Each arm's cells with the substrates as columns, for a run over several substrates
    (``effectbench.projections.substrates``); empty for a run over one."""
    out: dict[str, Any] = {}
    for name, arm in metrics["arms"].items():
        rows = substrate_rows((c["category"], c["substrate"], c) for c in arm.get("cells", ()))
        if rows is not None:
            out[name] = rows
    return out


def render_summary(manifest: Mapping[str, Any], metrics: Mapping[str, Any]) -> str:
    """summary.md from the manifest and metrics alone (jinja2 template in the package)."""
    import jinja2

    source = (
        resources.files("effectbench")
        .joinpath("templates/summary.md.j2")
        .read_text(encoding="utf-8")
    )
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    template = env.from_string(source)
    return template.render(
        m=manifest,
        metrics=metrics,
        arms=list(metrics.get("arm_order") or metrics["arms"]),
        pct=_pct,
        rate=_rate,
        gap=_gap,
        clustered=_clustered,
        prefix=_prefix,
        est=_est,
        diff=_diff,
        p=_p,
        num=_num,
        ks=_ks,
        frac=_frac,
        by_substrate=_by_substrate(metrics),
        substrates=SUBSTRATE_COLUMNS,
        min_trials=MIN_TRIALS_PER_TASK,
        fixture_lead=FIXTURE_LEAD,
        fixture_body=fixture_body,
        warnings=run_warnings(manifest, metrics),
    )
