"""The computer_use arm against the project's stand-in model, in both wire formats.

A real endpoint needs only the variables in openai.env or anthropic.env and
``effectbench run --arm computer_use``. The stand-in (effectbench.testing.computer_use)
is deterministic: rather than look at the pixels it reads the layout the page had when
each screenshot was taken, so it needs the arm's screen to record that (``screen=``),
hence this script. Its ``trust-banner`` model fills the form, clicks Save and trusts
the banner: MockMed's screen-only figures (SWER 5/9 a trial) in each format;
``check-records`` opens what was saved and checks it (effect_verified's 0/9). Both
work on Roundup's pages too (``--provider roundup``, docs/results-roundup.md).

    .venv/bin/python examples/computer-use/standin.py --out runs/cu-standin
    .venv/bin/python examples/computer-use/standin.py --provider roundup --trials 10 \\
        --model trust-banner --model check-records --format openai --out runs/cu-roundup
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import anyio
import orjson

from effectbench.api import evaluate_provider_async
from effectbench.arms.computer_use import ComputerUseArm
from effectbench.serve import LocalServer
from effectbench.testing.computer_use import Sight, StandIn

FORMATS = ("openai", "anthropic")


def _name(model: str, wire: str, models: Sequence[str]) -> str:
    """``cu_<wire>`` for one model (the example's names), else ``cu_<model>_<wire>``."""
    return f"cu_{wire}" if len(models) == 1 else f"cu_{model.replace('-', '_')}_{wire}"


def _concurrency(args: argparse.Namespace) -> int | None:
    """4 on MockMed (Chromium per episode); None takes the provider's recommendation."""
    if args.concurrency is not None:
        return int(args.concurrency)
    return 4 if args.provider == "mockmed" else None


async def main(args: argparse.Namespace) -> None:
    sight = Sight()
    server = LocalServer(StandIn(sight).app)
    await server.start()
    models: list[str] = args.model or ["trust-banner"]
    wires = FORMATS if args.format == "both" else (args.format,)
    try:
        arms = [
            ComputerUseArm(
                name=_name(model, wire, models),
                screen=sight.screen,
                environ={  # what `export EFFECTBENCH_CU_...` gives the command-line arm
                    "EFFECTBENCH_CU_BASE_URL": f"http://127.0.0.1:{server.port}/v1",
                    "EFFECTBENCH_CU_MODEL": model,
                    "EFFECTBENCH_CU_API_KEY": "stand-in-key",
                    "EFFECTBENCH_CU_FORMAT": wire,
                },
            )
            for model in models
            for wire in wires
        ]
        run = await evaluate_provider_async(
            arms, args.provider, trials=args.trials, concurrency=_concurrency(args),
            task_globs=args.task or None, out=args.out,
        )  # fmt: skip
    finally:
        await server.stop()
    metrics = orjson.loads((run.run_dir / "metrics.json").read_bytes())["arms"]
    for name, m in metrics.items():
        swer = m["swer"]
        print(f"{name}: SWER {swer['numerator']}/{swer['denominator']}")
    print(f"run directory: {run.run_dir}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a new run directory")
    parser.add_argument(
        "--model", action="append", choices=("trust-banner", "check-records"),
        help="a stand-in script, once per arm (default: trust-banner)",
    )  # fmt: skip
    parser.add_argument("--format", choices=(*FORMATS, "both"), default="both")
    parser.add_argument("--provider", default="mockmed", help="mockmed (default) or roundup")
    parser.add_argument("--task", action="append", help="a task glob (default: the whole pack)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument(
        "--concurrency", type=int, default=None,
        help="episodes at once (default: 4 on MockMed, else the provider's recommendation)",
    )  # fmt: skip
    anyio.run(main, parser.parse_args())
