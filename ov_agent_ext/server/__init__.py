"""The reference server: a minimal OpenViking 0.5.2-compatible server in one process.

It answers every request ``ov_agent_ext`` makes the way the real server does (the contract
suite in ``tests/contract`` runs against both), with SQLite storage, rule-based memory
extraction and a bag-of-words index on the real server's score scale. It shares the
contract, not the client's code: nothing here imports the client side of the package.

    from ov_agent_ext.server import create_app
    app = create_app("/tmp/ov-data")                  # an ASGI app (Starlette)

Needs the ``server`` extra (starlette, uvicorn, python-multipart).
"""

from .app import SERVER_VERSION, create_app

__all__ = ["SERVER_VERSION", "create_app"]
