"""The computer_use arm against the project's stand-in model, in both wire formats.

A real endpoint needs only the variables in openai.env or anthropic.env and
``effectbench run --arm computer_use``. The stand-in (effectbench.testing.computer_use)
is deterministic: rather than look at the pixels it reads the layout the page had when
each screenshot was taken, so it needs the arm's screen to record that (``screen=``),
hence this script. Its ``trust-banner`` model fills the form, clicks Save and trusts
the banner: MockMed's screen-only figures (SWER 5/9 a trial) in each format.

    .venv/bin/python examples/computer-use/standin.py --out runs/cu-standin
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import orjson

from effectbench.api import evaluate_provider_async
from effectbench.arms.computer_use import ComputerUseArm
from effectbench.serve import LocalServer
from effectbench.testing.computer_use import Sight, StandIn


async def main(out: Path, model: str) -> None:
    sight = Sight()
    server = LocalServer(StandIn(sight).app)
    await server.start()
    try:
        arms = [
            ComputerUseArm(
                name=f"cu_{wire}",
                screen=sight.screen,
                environ={  # what `export EFFECTBENCH_CU_...` gives the command-line arm
                    "EFFECTBENCH_CU_BASE_URL": f"http://127.0.0.1:{server.port}/v1",
                    "EFFECTBENCH_CU_MODEL": model,
                    "EFFECTBENCH_CU_API_KEY": "stand-in-key",
                    "EFFECTBENCH_CU_FORMAT": wire,
                },
            )
            for wire in ("openai", "anthropic")
        ]
        run = await evaluate_provider_async(arms, "mockmed", trials=1, concurrency=4, out=out)
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
    parser.add_argument("--model", default="trust-banner", help="trust-banner or check-records")
    args = parser.parse_args()
    anyio.run(main, args.out, args.model)
