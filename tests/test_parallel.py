"""The sharded (two-process) log pass writes byte-identical artifacts to the one-process
pass, and any problem in either worker's part gives the one-process error, line number
included, with nothing written."""

from __future__ import annotations

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
from effectbench.outputs.parallel import shard_of, sharded_pass


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


def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sharded pass fell back to the one-process pass")

    monkeypatch.setattr(artifacts, "sequential_pass", refuse)


def _both(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    a1 = build_artifacts(run, out_dir=one, workers=1, attest=attestations)
    with monkeypatch.context() as m:
        _no_fallback(m)
        a2 = build_artifacts(run, out_dir=two, workers=2, attest=attestations)
    assert (a1.events, a1.episodes, a1.final_hash) == (a2.events, a2.episodes, a2.final_hash)
    return one, two


def _assert_identical(one: Path, two: Path) -> None:
    for name in ARTIFACT_FILES:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert sorted(p.name for p in two.iterdir()) == sorted(ARTIFACT_FILES)  # no spill left


def test_real_mockmed_run_is_byte_identical(
    mockmed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = _both(mockmed_run, tmp_path, monkeypatch)
    _assert_identical(one, two)
    assert len((two / "results.jsonl").read_bytes().splitlines()) == 36


def test_both_workers_fold_episodes(mockmed_run: Path) -> None:
    eps = {e.ep for e in read_log(mockmed_run / "events.jsonl") if e.ep is not None}
    assert {shard_of(ep.encode(), 2) for ep in eps} == {0, 1}


def _eps_per_shard(run: Path) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {0: [], 1: []}
    for e in read_log(run / "events.jsonl"):
        if e.type == "episode.planned" and e.ep is not None:
            out[shard_of(e.ep.encode(), 2)].append(e.ep)
    return out


def test_edge_cases_merge_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot recorded on both shards (later record wins), a re-run episode, episodes that
    never finish (drained in first-seen order), a torn tail."""
    entries = _entries(mockmed_run)
    finished = entries.pop()
    assert finished[0] == "run.finished"
    by_ep: dict[str, list[LogEntry]] = {}
    for entry in entries:
        if entry[2] is not None:
            by_ep.setdefault(entry[2], []).append(entry)
    shards = _eps_per_shard(mockmed_run)
    a, b = shards[0][0], shards[1][0]
    # the same planned (arm, task, trial) as ``a`` under an id of the other shard
    alias = next(f"{a}-again{i}" for i in range(100) if shard_of(f"{a}-again{i}".encode(), 2) == 1)
    extra: list[LogEntry] = [(t, d, alias) for t, d, _ in by_ep[a]]
    # ``b`` runs a second complete time, then once more without finishing; an alias of it
    # on the other shard starts and never finishes either
    extra += by_ep[b]
    extra += [(t, d, ep) for t, d, ep in by_ep[b] if t not in ("episode.finished",)]
    alias_b = next(f"{b}-x{i}" for i in range(100) if shard_of(f"{b}-x{i}".encode(), 2) == 0)
    extra += [(t, d, alias_b) for t, d, _ in by_ep[b][:3]]
    run = tmp_path / "edge"
    run.mkdir()
    write_events_sync(run / "events.jsonl", [*entries, *extra, finished])
    with open(run / "events.jsonl", "ab") as f:
        f.write(b'{"v":1,"seq":99999,"type":"episode.fin')  # torn tail
    one, two = _both(run, tmp_path, monkeypatch)
    _assert_identical(one, two)
    manifest = orjson.loads((two / "manifest.json").read_bytes())
    assert manifest["log"]["torn_tail"] is True


def _line_of(run: Path, shard: int, parity: int) -> int:
    """1-based number of an episode line of that shard whose 0-based index has that parity."""
    for e in read_log(run / "events.jsonl"):
        if e.ep is not None and shard_of(e.ep.encode(), 2) == shard and e.seq % 2 == parity:
            return e.line_no
    raise AssertionError("no such line")


def _edit_line(path: Path, line_no: int, edit: Any) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = edit(lines[line_no - 1])
    path.write_bytes(b"\n".join(lines))


def _errors(run: Path, tmp_path: Path) -> tuple[str, str]:
    messages = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        out.mkdir()
        with pytest.raises(ArtifactError) as info:
            build_artifacts(run, out_dir=out, workers=workers, attest=attestations)
        assert list(out.iterdir()) == [], "something was written for a broken log"
        messages.append(str(info.value))
    return messages[0], messages[1]


@pytest.mark.parametrize("shard", [0, 1])
@pytest.mark.parametrize("parity", [0, 1])
def test_broken_link_in_either_part_is_reported_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path, shard: int, parity: int
) -> None:
    run = _copy_log(mockmed_run, tmp_path / "run")
    n = _line_of(run, shard, parity)
    # an edit that keeps the line valid JSON: only the hash chain can see it
    _edit_line(run / "events.jsonl", n, lambda line: line.replace(b'"ts":', b'"ts":1', 1))
    one, two = _errors(run, tmp_path)
    assert two == one
    assert f"line {n}: hash does not chain" in one


@pytest.mark.parametrize("shard", [0, 1])
def test_corrupt_line_in_either_shard_is_reported_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path, shard: int
) -> None:
    run = _copy_log(mockmed_run, tmp_path / "run")
    n = _line_of(run, shard, 1 - shard)
    _edit_line(run / "events.jsonl", n, lambda line: line.replace(b'"data":{', b'"data":[', 1))
    one, two = _errors(run, tmp_path)
    assert two == one
    assert f"line {n}:" in one


def test_a_removed_line_is_reported_like_the_one_process_pass(
    mockmed_run: Path, tmp_path: Path
) -> None:
    run = _copy_log(mockmed_run, tmp_path / "run")
    n = _line_of(run, 1, 0)
    _edit_line(run / "events.jsonl", n, lambda line: b"")
    lines = (run / "events.jsonl").read_bytes().replace(b"\n\n", b"\n")
    (run / "events.jsonl").write_bytes(lines)
    one, two = _errors(run, tmp_path)
    assert two == one
    assert f"line {n}:" in one


def test_sharded_pass_declines_what_it_cannot_do(tmp_path: Path) -> None:
    empty = tmp_path / "events.jsonl"
    empty.write_bytes(b"")
    assert sharded_pass(empty, tmp_path, 2) is None
    assert sharded_pass(empty, tmp_path, 3) is None
    assert list(tmp_path.iterdir()) == [empty]
