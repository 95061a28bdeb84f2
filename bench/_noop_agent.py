"""A no-op protocol agent: answers every episode at once with a halt (bench/agent_protocol.py).

It reads whatever stdin holds and answers all of it in one write, so the agent costs
as little as a Python program can and the bench measures the harness's side. Standard
library only, so it also runs under the system Python inside the sandbox."""

import json
import os


def main() -> None:
    pending = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return
        *lines, pending = (pending + chunk).split(b"\n")
        out = []
        for line in lines:
            msg = json.loads(line)
            if msg.get("type") == "episode":
                ep = json.dumps(msg["episode_id"])
                out.append(
                    f'{{"type":"report","episode_id":{ep},"reported_success":false,"halted":true}}\n'
                )
        if out:
            os.write(1, "".join(out).encode())


if __name__ == "__main__":
    main()
