"""A protocol agent that sends ``N`` small actions and a model call per episode, then
halts (bench/agent_bounds.py): ``_chatty_agent.py N``. Standard library only."""

import json
import os
import sys


def main() -> None:
    n = int(sys.argv[1])
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
            action = f'{{"type":"action","episode_id":{ep},"kind":"click","detail":{{"x":1}}}}\n'
            out.append(action * n)
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
