"""A no-op protocol agent: answers every episode at once with a halt (bench/agent_protocol.py).

Standard library only, so it also runs under the system Python inside the sandbox."""

import json
import sys


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("type") == "episode":
            ep = json.dumps(msg["episode_id"])
            out.write(f'{{"type":"report","episode_id":{ep},"reported_success":false,"halted":true}}\n')
            out.flush()


if __name__ == "__main__":
    main()
