"""The drill-down sample: bounded memory, the same choice as picking from every episode."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from effectbench.api import evaluate_provider
from effectbench.report.data import load_run
from effectbench.report.sample import EpisodeRef, EpisodeSampler, select_episodes
from effectbench.testing import InMemoryProvider, ScriptedArm


def _pick_from_everything(refs: list[EpisodeRef], limit: int, want: list[str]) -> list[int]:
    """The choice spelled over the full list: round-robin over (arm, label) groups."""
    if len(refs) <= limit:
        return [r.slot for r in refs]
    groups: dict[tuple[str, str], list[EpisodeRef]] = {}
    for r in refs:
        groups.setdefault((r.arm, r.label), []).append(r)
    chosen: set[int] = set()
    depth = 0
    while len(chosen) < limit and any(depth < len(g) for g in groups.values()):
        for g in groups.values():
            if depth < len(g) and len(chosen) < limit:
                chosen.add(g[depth].slot)
        depth += 1
    last = {r.episode_id: r.slot for r in refs}
    return sorted(chosen | {last[w] for w in want})


_LABELS = ["success", "SWER phantom", "SWER wrong write", "safe halt", "failed: agent"]


@st.composite
def _runs(draw: st.DrawFn) -> tuple[list[EpisodeRef], int, list[str]]:
    n = draw(st.integers(0, 300))
    arms = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n))
    labels = draw(st.lists(st.sampled_from(_LABELS), min_size=n, max_size=n))
    refs = [EpisodeRef(i, f"{arm}::t{i}::t0", arm, f"t{i}", 0, lab)
            for i, (arm, lab) in enumerate(zip(arms, labels, strict=True))]  # fmt: skip
    limit = draw(st.integers(1, 40))
    want = draw(st.lists(st.sampled_from([r.episode_id for r in refs]), max_size=3)) if refs else []
    return refs, limit, want


@given(_runs())
def test_the_streamed_sample_chooses_what_the_full_list_would(
    run: tuple[list[EpisodeRef], int, list[str]],
) -> None:
    refs, limit, want = run
    sampler = EpisodeSampler(limit, frozenset(want))
    for r in refs:
        sampler.add(r)
    sample = sampler.sample()
    picked, note = select_episodes(sample, limit, want)
    assert [p.slot for p in picked] == _pick_from_everything(refs, limit, want)
    assert select_episodes(refs, limit, want) == (picked, note)
    assert sample.total == len(refs) and str(len(refs)) in note
    kept = sum(len(g) for g in sample.groups)
    assert kept <= len(sample.groups) * limit  # bounded by groups x limit, not the run


def test_a_run_keeps_only_its_drill_down_sample(tmp_path: Path) -> None:
    """load_run on a real run of 40 episodes with limit 3 keeps at most 3 per (arm,
    label) group, and no per-episode labels unless asked for."""
    run = evaluate_provider(
        [ScriptedArm(name="a"), ScriptedArm(name="b")], InMemoryProvider(("ok",)), trials=20,
        out=tmp_path / "r",
    )  # fmt: skip
    data = load_run(run.run_dir, drill_limit=3, codes=False)
    assert data.episodes.total == 40 and data.codes == {}
    assert sum(len(g) for g in data.episodes.groups) <= 3 * len(data.episodes.groups) < 40
    assert len(load_run(run.run_dir).codes) == 40
