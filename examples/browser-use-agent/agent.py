"""An EffectBench protocol agent (docs/agent-protocol.md) that hands each episode to a
browser-use agent driven by an OpenAI-compatible model, on the episode's own browser.

NOT EXERCISED IN CI (see README.md): written against browser-use 0.13's published API
(``Agent``, ``Browser(cdp_url=...)``, ``ChatOpenAI``), never run here.

The model is configured in ``model.env`` beside this script (a contained agent's
environment is cleared; the script's directory is mounted read-only, so the file is
readable inside the sandbox). What it scores depends on the model: one that trusts
the "Saved" banner scores like the reference screen-only agent (MockMed: SWER 5/9 a
trial); one that opens the records page to check scores like effect_verified.

    effectbench run --isolate --arm 'browser-use=exec+browser:.venv/bin/python agent.py'
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")  # no network but the product's
os.environ.setdefault("BROWSER_USE_SETUP_LOGGING", "false")  # stdout is the protocol's

from browser_use import Agent, Browser, ChatOpenAI  # after the variables above

HERE = Path(__file__).resolve().parent
PROMPT = (
    "{goal}\n\nOpen {url} and do it in the browser, with these values: {values}. "
    "When you are done, say whether the record was really saved as asked."
)


def model_settings() -> dict[str, str]:
    """``model.env``: KEY=value lines (BASE_URL, MODEL, API_KEY)."""
    lines = (HERE / "model.env").read_text("utf-8").splitlines()
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def episode(msg: dict[str, Any], settings: dict[str, str]) -> None:
    ep, task, channels = msg["episode_id"], msg["task"], msg["channels"]
    endpoint = (msg.get("browser") or {}).get("cdp_url")
    if not endpoint:
        send({"type": "error", "episode_id": ep, "message": "no browser: use exec+browser:"})
        return
    llm = ChatOpenAI(
        model=settings["MODEL"], base_url=settings["BASE_URL"], api_key=settings.get("API_KEY")
    )
    url = channels.get("web_url") or channels.get("base_url")
    prompt = PROMPT.format(goal=task["goal"], url=url, values=json.dumps(task.get("solution")))
    browser = Browser(cdp_url=endpoint)  # the episode's context; never launches one
    history = await Agent(task=prompt, llm=llm, browser=browser).run(max_steps=20)
    success = bool(history.is_done() and history.is_successful())
    send({"type": "report", "episode_id": ep, "reported_success": success,
          "halted": not success, "message": str(history.final_result() or "")[:2000]})  # fmt: skip


async def guarded(msg: dict[str, Any], settings: dict[str, str]) -> None:
    try:
        await episode(msg, settings)
    except Exception as exc:  # noqa: BLE001 - told to the harness, which fails the episode
        send({"type": "error", "episode_id": msg["episode_id"], "message": repr(exc)})


async def main() -> None:
    settings = model_settings()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()
    while line := await reader.readline():  # end of stdin: the run is over
        msg = json.loads(line) if line.strip() else {}
        if msg.get("type") == "episode":
            task = asyncio.create_task(guarded(msg, settings))
            running.add(task)
            task.add_done_callback(running.discard)
    await asyncio.gather(*running)


if __name__ == "__main__":
    asyncio.run(main())
