"""The reference server under uvicorn in a background thread, on a loopback port.

Used by ``ov-agent-ext demo`` and by tests that need a real socket: ``port=0`` takes any free
port, and stopping one and starting another on the same port and data directory is a server
restart.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

__all__ = ["ThreadedServer"]

START_DEADLINE = 15.0  # seconds for uvicorn to bind and start


class ThreadedServer:
    """An ASGI app served on 127.0.0.1 from a daemon thread; ``url`` once started."""

    def __init__(self, app: Any, *, port: int = 0, log_level: str = "warning"):
        import uvicorn  # the server extra: imported only when a server is started

        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_DEADLINE
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.stop()
                raise RuntimeError("the reference server did not start on loopback")
            time.sleep(0.005)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> ThreadedServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
