"""An agent process for the kill tests: accepts turns into the outbox while its background
flusher sends them to a loopback server, until the test SIGKILLs it.

    python agent.py STATE_DIR URL SEED TURNS

Each session continues after the turn the outbox already holds (its watermark), first
checking that the old index is refused (the guard survived the previous process). Prints
``accepted <session> <index>`` once ``accept_turn`` returned, then ``all accepted``.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ov_agent_ext.breaker import CircuitBreaker
from ov_agent_ext.client import OVClient
from ov_agent_ext.outbox import Outbox
from ov_agent_ext.sync import SyncManager, identity_of
from sync_helpers import make_config, turn

SESSIONS = ("k1", "k2")


async def main(state_dir: Path, url: str, seed: int, turns: int) -> None:
    config = make_config(
        url,
        state_dir,
        write_queue_flush_interval=10,
        write_queue_flush_threshold=1,
        commit_token_threshold=50,
        write_timeout=5,
    )
    outbox = Outbox(state_dir / "outbox.sqlite3")
    client = OVClient(config, breaker=CircuitBreaker(base_delay=0.02, max_delay=0.1))
    sync = SyncManager(client, config, outbox)
    sync.start()
    rng = random.Random(seed)
    first = {}
    for sid in SESSIONS:
        mark = outbox.session_state(identity_of(config), sid).watermark
        if mark is not None:
            assert not sync.accept_turn(sid, mark, turn(sid, mark), tokens=10)
            print(f"guard {sid} {mark}", flush=True)
        first[sid] = 0 if mark is None else mark + 1
    for i in range(turns):
        for sid in SESSIONS:
            index = first[sid] + i
            assert sync.accept_turn(sid, index, turn(sid, index, tools=index % 3 == 0), 10)
            print(f"accepted {sid} {index}", flush=True)
        await asyncio.sleep(rng.uniform(0, 0.004))
    print("all accepted", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
