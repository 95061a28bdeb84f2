"""Substrates: episodes/s at concurrency 1, 4, 8 and memory per display, per substrate.

Each episode is what `effectbench run --provider mockmed-substrates --arm screen_only
--arm effect_verified` does on one substrate's nine anchor tasks. On `desktop` that is a
fresh MockMed database and URL token, a display of the episode's own (reset after it:
a new Xvfb, session bus, accessibility bus and registry), MockMed's GTK client started
on it, the form filled, saved and its banner read through the accessibility tree
(effect_verified also reads the product's readback before and after), two oracle reads,
teardown. `web` is the same anchor over HTTP, for scale. CPU is this process plus its
children (every display process and client, reaped by the pool), so "cpu ms/ep" is what
one episode costs the machine.

On `remote_display` the display is served over VNC (Xvnc in Xvfb's place) and the form
is filled, saved and its banner read from the framebuffer alone (OCR and pixel colours,
effectbench_mockmed/remote/driver.py), over the episode's VNC port.

Memory: N episodes of a substrate held open with their client up, RSS, PSS and USS
(private pages) summed over every process of their displays (Xvfb or Xvnc, the
dbus-daemons, the registry where there is one, the client); per display = the sum / N,
and per process kind. OCR: what one screen read costs (wall and CPU: tesseract's engine
runs in the reading thread), median of 10, on MockMed's form as the remote_display
driver reads it (the whole window, after a save) and on its banner's row, and what
starting an engine (loading the model) costs, once per engine. Targets
on this 2-core machine (issue 28): desktop >= 4 episodes/s at concurrency 8,
remote_display >= 2, <= 60 MiB per display.

    .venv/bin/python bench/substrates.py [--trials 4] [--runs 1] [--substrate S] [--json PATH]
"""

from __future__ import annotations

import ctypes
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import _common as common
import anyio
from effectbench_mockmed.packs_substrates import MockMedSubstratesProvider

from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm
from effectbench.core.arm import Arm
from effectbench.core.model import Substrate, trial_params

SUBSTRATES = (Substrate.WEB, Substrate.DESKTOP, Substrate.REMOTE_DISPLAY)
DISPLAYED = (Substrate.DESKTOP, Substrate.REMOTE_DISPLAY)
CONCURRENCY = (1, 4, 8)
TARGET_DESKTOP_EPS_AT_8 = 4.0
TARGET_REMOTE_EPS_AT_8 = 2.0
TARGET_MIB_PER_DISPLAY = 60.0
HELD = 8
"""Desktop episodes held open for the memory figure."""


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_once(substrate: Substrate, trials: int, concurrency: int) -> tuple[float, float, int]:
    """(wall s, CPU s of the harness and every display process, episodes) of one run."""
    provider = MockMedSubstratesProvider()
    tasks = [t for t in provider.tasks() if t.substrate is substrate]
    arms: dict[str, Arm] = {"screen_only": ScreenOnlyArm(), "effect_verified": EffectVerifiedArm()}
    return common.scheduled_run(provider, tasks, arms, trials, concurrency, _cpu)


def _children(root: int) -> list[int]:
    return common.process_children().get(root, [])


def _kind(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
    if any(a.endswith(b"gtk_client.py") for a in argv):
        return "client"
    return comm


def _memory_kib(pid: int) -> tuple[int, int, int]:
    """(RSS, PSS, USS) in KiB of one process: USS is its private pages, what its exit
    gives back."""
    found = dict.fromkeys(("Rss", "Pss", "Private_Clean", "Private_Dirty"), 0)
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0, 0, 0
    for line in lines:
        key = line.split(":", 1)[0]
        if key in found:
            found[key] = int(line.split()[1])
    return found["Rss"], found["Pss"], found["Private_Clean"] + found["Private_Dirty"]


async def _memory(held: int, substrate: Substrate) -> dict[str, Any]:
    """RSS and PSS per display, with ``held`` episodes of ``substrate`` open at once."""
    provider = MockMedSubstratesProvider()
    task = next(t for t in provider.tasks() if t.substrate is substrate)
    await provider.start()
    episodes = []
    try:
        for trial in range(held):
            episodes.append(await provider.provision(task, trial, trial_params(task, trial)))
        await anyio.sleep(1.0)  # let the clients settle after their first paint
        by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for pid in _children(os.getpid()):
            kind = _kind(pid)
            if kind in ("Xvfb", "Xvnc", "dbus-daemon", "at-spi2-registr", "client"):
                for i, kib in enumerate(_memory_kib(pid)):
                    by_kind[kind][i] += kib
    finally:
        for episode in episodes:
            await episode.teardown()
        await provider.stop()

    def per_display(i: int) -> float:
        return sum(v[i] for v in by_kind.values()) / 1024 / held

    return {
        "held": held,
        "rss_mib_per_display": per_display(0),
        "pss_mib_per_display": per_display(1),
        "uss_mib_per_display": per_display(2),
        "by_process": {
            k: {"rss_mib": v[0] / 1024 / held, "pss_mib": v[1] / 1024 / held,
                "uss_mib": v[2] / 1024 / held}
            for k, v in sorted(by_kind.items())
        },
    }  # fmt: skip


async def _ocr(reads: int) -> dict[str, Any]:
    """Wall and CPU seconds of one OCR read (tesseract's engine runs in the reading
    thread), median of ``reads``: of MockMed's form as the remote_display driver reads
    it (after a save, so its banner shows), and of the banner's row as the driver reads
    it; and the first read's, which starts the engine."""
    from effectbench_mockmed.remote.driver import RemoteFormDriver

    from effectbench.core.provider import Telemetry
    from effectbench.displays.ocr import _new_engine, content_box, read_text
    from effectbench.displays.pixels import Screen
    from effectbench.displays.rfb import open_rfb
    from effectbench.displays.vnc import VncChannel
    from effectbench.displays.widgets import row_below

    provider = MockMedSubstratesProvider()
    task = next(t for t in provider.tasks() if t.substrate is Substrate.REMOTE_DISPLAY)
    await provider.start()
    try:
        episode = await provider.provision(task, 0, trial_params(task, 0))
        try:
            vnc = VncChannel.from_channels(episode.env.channels)
            assert vnc is not None
            values = {"patient_id": "p1", "type": "Triage", "note": "bench", "key": "k-1"}
            await RemoteFormDriver(vnc, Telemetry()).submit(values)
            async with open_rfb(vnc.password, host=vnc.host, port=vnc.port) as rfb:
                frame = await Screen(rfb).settle()
        finally:
            await episode.teardown()
    finally:
        await provider.stop()
    window = content_box(frame)
    assert window is not None
    out: dict[str, Any] = {"window": [window.width, window.height]}
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    _new_engine().End()  # what the first read in a process pays once, per engine
    out["engine_start"] = {
        "wall_s": time.perf_counter() - wall0, "cpu_s": time.thread_time() - cpu0
    }  # fmt: skip
    form = read_text(frame)
    heading = form.find("New encounter")
    assert heading is not None, form.text
    row = row_below(heading, window.right)  # the banner's row, as the driver reads it
    for name, box in (("form", None), ("banner_row", row)):
        walls, cpus = [], []
        for _ in range(reads):
            cpu0 = time.thread_time()
            walls.append(read_text(frame, box).seconds)
            cpus.append(time.thread_time() - cpu0)
        out[name] = {"wall_s": common.median(walls), "cpu_s": common.median(cpus)}
    return out


def main() -> None:
    ap = common.parser(__doc__)
    ap.add_argument("--trials", type=int, default=4, help="trials per task per run")
    ap.add_argument(
        "--substrate", choices=[s.value for s in SUBSTRATES], action="append",
        help="only this substrate (repeatable; default: all)",
    )  # fmt: skip
    ap.set_defaults(runs=1)
    args = ap.parse_args()
    chosen = [s for s in SUBSTRATES if not args.substrate or s.value in args.substrate]
    ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: clients' CPU counts too
    before = common.loadavg()
    print(common.load_line())
    rows = []
    for substrate in chosen:
        for concurrency in CONCURRENCY:
            walls, cpus, n = [], [], 0
            for _ in range(args.runs):
                wall, cpu, n = run_once(substrate, args.trials, concurrency)
                walls.append(wall)
                cpus.append(cpu)
            w = common.median(walls)
            rows.append({
                "substrate": substrate.value, "concurrency": concurrency, "episodes": n,
                "wall_s": walls, "episodes_per_s": n / w,
                "cpu_ms_per_episode": common.median(cpus) / n * 1e3,
            })  # fmt: skip
    print(common.table(
        ["substrate", "concurrency", "episodes", "episodes/s", "cpu ms/ep"],
        [[r["substrate"], r["concurrency"], r["episodes"], round(r["episodes_per_s"], 2),
          round(r["cpu_ms_per_episode"], 1)] for r in rows],
    ))  # fmt: skip
    memory = {
        s.value: anyio.run(_memory, HELD, s) for s in chosen if s in DISPLAYED
    }  # fmt: skip
    for name, held in memory.items():
        print(
            f"\n{name} memory, {HELD} displays held: "
            f"{held['rss_mib_per_display']:.1f} MiB RSS per display "
            f"({held['pss_mib_per_display']:.1f} MiB PSS, "
            f"{held['uss_mib_per_display']:.1f} MiB USS)"
        )
        print(common.table(
            ["process", "RSS MiB/display", "PSS MiB/display", "USS MiB/display"],
            [[k, round(v["rss_mib"], 1), round(v["pss_mib"], 1), round(v["uss_mib"], 1)]
             for k, v in held["by_process"].items()],
        ))  # fmt: skip
    ocr = None
    if Substrate.REMOTE_DISPLAY in chosen:
        ocr = anyio.run(_ocr, 10)
        width, height = ocr["window"]
        print(f"\nOCR per screen read (MockMed's {width}x{height} window, median of 10):")
        print(common.table(
            ["read", "wall s", "cpu s"],
            [[k, round(ocr[k]["wall_s"], 3), round(ocr[k]["cpu_s"], 3)]
             for k in ("engine_start", "form", "banner_row")],
        ))  # fmt: skip
    targets = (
        (Substrate.DESKTOP, TARGET_DESKTOP_EPS_AT_8),
        (Substrate.REMOTE_DISPLAY, TARGET_REMOTE_EPS_AT_8),
    )
    print()
    for substrate, target in targets:
        if substrate not in chosen:
            continue
        at8 = next(r for r in rows if r["substrate"] == substrate.value and r["concurrency"] == 8)
        held = memory[substrate.value]
        print(
            f"targets: {substrate.value} >= {target:g} episodes/s at 8: "
            f"{at8['episodes_per_s']:.2f}; <= {TARGET_MIB_PER_DISPLAY:g} MiB per display: "
            f"{held['rss_mib_per_display']:.1f} RSS, {held['pss_mib_per_display']:.1f} PSS"
        )
    print(common.load_line())
    common.write_json(args.json, "substrates", {"rows": rows, "memory": memory, "ocr": ocr}, before)


if __name__ == "__main__":
    main()
