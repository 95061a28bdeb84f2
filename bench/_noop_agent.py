"""A no-op protocol agent: answers every episode at once with a halt (bench/agent_protocol.py).

It reads whatever stdin holds and answers all of it in one write, so the agent costs
as little as a Python program can and the bench measures the harness's side. Standard
library only, so it also runs under the system Python inside the sandbox.

``_noop_agent.py N`` first sends N small actions and a model call per episode (the
chatty agent of bench/agent_bounds.py)."""

import json
import os
import sys


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    pending = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return
        *lines, pending = (pending + chunk).split(b"\n")
        out = []
        for line in lines:
            msg = json.loads(line)
            if msg.get("type") != "episode":
                continue
            ep = json.dumps(msg["episode_id"])
            if n:
                action = f'{{"type":"action","episode_id":{ep},"kind":"click","detail":{{"x":1}}}}'
                out.append(f"{action}\n" * n)
                out.append(
                    f'{{"type":"model_call","episode_id":{ep},"input_tokens":10,"cost_usd":0.001}}\n'
                )
            out.append(
                f'{{"type":"report","episode_id":{ep},"reported_success":false,"halted":true}}\n'
            )
        if out:
            os.write(1, "".join(out).encode())


if __name__ == "__main__":
    main()
