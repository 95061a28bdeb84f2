"""The sharded log pass (W processes, each a contiguous part of the log) writes
byte-identical artifacts to the one-process pass, and any problem in any worker's part
gives the one-process error, line number included, with nothing written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from effectbench.api import evaluate
from effectbench.audit.attest import attestations
from effectbench.core.rundir import ARTIFACT_FILES
from effectbench.log.reader import LogEntry, read_log, write_events_sync
from effectbench.outputs import artifacts
from effectbench.outputs.artifacts import ArtifactError, build_artifacts
from effectbench.outputs.parallel import sharded_pass, split_points


@pytest.fixture(scope="module")
def mockmed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mockmed") / "run"
    evaluate(["screen_only", "effect_verified"], trials=2, out=out)
    return out


def _entries(run: Path) -> list[LogEntry]:
    return [(e.type, e.data, e.ep) for e in read_log(run / "events.jsonl")]


def _copy_log(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    shutil.copy(src / "events.jsonl", dst / "events.jsonl")
    return dst


class _Fallbacks:
    def __init__(self) -> None:
        self.count = 0


def _count_fallbacks(monkeypatch: pytest.MonkeyPatch) -> _Fallbacks:
    seen = _Fallbacks()
    sequential = artifacts.sequential_pass

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.count += 1
        return sequential(*args, **kwargs)

    monkeypatch.setattr(artifacts, "sequential_pass", counted)
    return seen


def _both(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> tuple[Path, Path, int]:
    """Artifacts of the one-process pass and of ``workers`` processes, and how often the
    latter fell back to the former."""
    one, many = tmp_path / "one", tmp_path / f"many{workers}"
    one.mkdir(exist_ok=True)
    many.mkdir()
    a1 = build_artifacts(run, out_dir=one, workers=1, attest=attestations)
    with monkeypatch.context() as m:
        seen = _count_fallbacks(m)
        a2 = build_artifacts(run, out_dir=many, workers=workers, attest=attestations)
    assert (a1.events, a1.episodes, a1.final_hash) == (a2.events, a2.episodes, a2.final_hash)
    return one, many, seen.count


def _assert_identical(one: Path, two: Path) -> None:
    for name in ARTIFACT_FILES:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert sorted(p.name for p in two.iterdir()) == sorted(ARTIFACT_FILES)  # no spill left


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_real_mockmed_run_is_byte_identical_without_falling_back(
    mockmed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """A real run at concurrency 32: episodes are in flight at every split point, so the
    parts hand them over (the pass would fall back if the hand-over did not add up)."""
    one, many, fallbacks = _both(mockmed_run, tmp_path, monkeypatch, workers)
    _assert_identical(one, many)
    assert fallbacks == 0
    assert len((many / "results.jsonl").read_bytes().splitlines()) == 36


def _starts(run: Path, workers: int) -> list[int]:
    """1-based line numbers where each part starts."""
    log = run / "events.jsonl"
    data = log.read_bytes()
    fd = os.open(log, os.O_RDONLY)
    try:
        offsets = split_points(fd, len(data), workers)
    finally:
        os.close(fd)
    return [data[:o].count(b"\n") + 1 for o in offsets]


def test_split_points_are_line_starts(mockmed_run: Path) -> None:
    data = (mockmed_run / "events.jsonl").read_bytes()
    for workers in (2, 3, 7):
        fd = os.open(mockmed_run / "events.jsonl", os.O_RDONLY)
        try:
            offsets = split_points(fd, len(data), workers)
        finally:
            os.close(fd)
        assert len(offsets) == workers
        assert offsets == sorted(set(offsets))
        assert offsets[0] == 0 and all(data[o - 1 : o] == b"\n" for o in offsets[1:])


def _edge_log(mockmed_run: Path, tmp_path: Path) -> Path:
    """A slot recorded twice (later record wins), a re-run episode, episodes that never
    finish (drained in first-seen order), a torn tail."""
    entries = _entries(mockmed_run)
    finished = entries.pop()
    assert finished[0] == "run.finished"
    by_ep: dict[str, list[LogEntry]] = {}
    for entry in entries:
        if entry[2] is not None:
            by_ep.setdefault(entry[2], []).append(entry)
    eps = list(by_ep)
    a, b = eps[0], eps[-1]
    extra: list[LogEntry] = [(t, d, f"{a}-again") for t, d, _ in by_ep[a]]
    extra += by_ep[b]  # b runs a second complete time, then once more without finishing
    extra += [(t, d, ep) for t, d, ep in by_ep[b] if t != "episode.finished"]
    extra += [(t, d, f"{b}-x") for t, d, _ in by_ep[b][:3]]
    run = tmp_path / "edge"
    run.mkdir()
    # the extra episodes interleave with the last ones, so they span the last split
    write_events_sync(run / "events.jsonl", [*entries[:-40], *extra, *entries[-40:], finished])
    with open(run / "events.jsonl", "ab") as f:
        f.write(b'{"v":1,"seq":99999,"type":"episode.fin')  # torn tail
    return run


@pytest.mark.parametrize("workers", [2, 3, 4, 6])
def test_edge_cases_merge_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    run = _edge_log(mockmed_run, tmp_path)
    one, many, _ = _both(run, tmp_path, monkeypatch, workers)
    _assert_identical(one, many)
    manifest = orjson.loads((many / "manifest.json").read_bytes())
    assert manifest["log"]["torn_tail"] is True


def test_an_event_after_its_terminal_in_a_later_part_is_refused_like_one_process(
    mockmed_run: Path, tmp_path: Path
) -> None:
    """The later part skips an event of an episode it has no attempt for, and no earlier
    part took it over: the pass must not drop it silently."""
    entries = _entries(mockmed_run)
    first_ep = next(ep for _, _, ep in entries if ep is not None)
    stray: LogEntry = ("episode.reported", {"reported_success": True}, first_ep)
    run = tmp_path / "run"
    run.mkdir()
    write_events_sync(run / "events.jsonl", [*entries[:-1], stray, entries[-1]])
    one, two = _errors(run, tmp_path, 3)
    assert two == one
    assert "has no episode.planned before it" in one


def _edit_line(path: Path, line_no: int, edit: Any) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = edit(lines[line_no - 1])
    path.write_bytes(b"\n".join(lines))


def _errors(run: Path, tmp_path: Path, workers: int = 2) -> tuple[str, str]:
    messages = []
    for n in (1, workers):
        out = tmp_path / f"out{n}"
        out.mkdir()
        with pytest.raises(ArtifactError) as info:
            build_artifacts(run, out_dir=out, workers=n, attest=attestations)
        assert list(out.iterdir()) == [], "something was written for a broken log"
        messages.append(str(info.value))
    return messages[0], messages[1]


# lines at and around the split of 3 parts: the first of a part, the one before it, the
# last of the log, one in the middle of a part
_WHERE = {"part start": 0, "before a part": -1, "mid part": 5, "last line": None}


@pytest.mark.parametrize("part", [1, 2])
@pytest.mark.parametrize("where", list(_WHERE))
def test_broken_link_in_any_part_is_reported_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path, part: int, where: str
) -> None:
    run = _copy_log(mockmed_run, tmp_path / "run")
    starts = _starts(run, 3)
    total = len(_entries(run))
    step = _WHERE[where]
    n = total if step is None else starts[part] + step
    # an edit that keeps the line valid JSON: only the hash chain can see it
    _edit_line(run / "events.jsonl", n, lambda line: line.replace(b'"ts":', b'"ts":1', 1))
    one, two = _errors(run, tmp_path, 3)
    assert two == one
    assert f"line {n}: hash does not chain" in one


@pytest.mark.parametrize("where", list(_WHERE))
def test_corrupt_line_in_any_part_is_reported_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path, where: str
) -> None:
    run = _copy_log(mockmed_run, tmp_path / "run")
    starts = _starts(run, 2)
    step = _WHERE[where]
    n = len(_entries(run)) if step is None else starts[1] + step
    _edit_line(run / "events.jsonl", n, lambda line: line.replace(b'"data":{', b'"data":[', 1))
    one, two = _errors(run, tmp_path)
    assert two == one
    assert f"line {n}:" in one


def test_a_removed_line_is_reported_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path
) -> None:
    run = _copy_log(mockmed_run, tmp_path / "run")
    n = _starts(run, 2)[1] + 3
    _edit_line(run / "events.jsonl", n, lambda line: b"")
    lines = (run / "events.jsonl").read_bytes().replace(b"\n\n", b"\n")
    (run / "events.jsonl").write_bytes(lines)
    one, two = _errors(run, tmp_path)
    assert two == one
    assert f"line {n}:" in one


def test_sharded_pass_declines_what_it_cannot_do(mockmed_run: Path, tmp_path: Path) -> None:
    empty = tmp_path / "events.jsonl"
    empty.write_bytes(b"")
    assert sharded_pass(empty, tmp_path, 2) is None
    assert sharded_pass(empty, tmp_path, 3) is None
    one_line = tmp_path / "one" / "events.jsonl"
    one_line.parent.mkdir()
    one_line.write_bytes((mockmed_run / "events.jsonl").read_bytes().split(b"\n")[0] + b"\n")
    assert sharded_pass(one_line, one_line.parent, 4) is None  # one line, one part
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "one"]
