"""The ``ov-agent-ext`` command line: a thin layer over the library.

    ov-agent-ext demo                          two sessions against the embedded server
    ov-agent-ext config [--json | --example]   the resolved config, each value with its source
    ov-agent-ext status [--json]               server, identity, outbox, breaker
    ov-agent-ext search QUERY [--scope URI]    search the memory store
    ov-agent-ext commit SESSION [--no-wait]    flush queued writes and commit a session
    ov-agent-ext tools [--format F]            the seven tool schemas (openai|anthropic|mcp)
    ov-agent-ext version
    ov-agent-ext serve --data-dir DIR [--host 127.0.0.1] [--port 1933] [--api-key ROOT_KEY]
                                               run the reference OpenViking server

Exit codes: 0 success, 1 the server is unreachable or answered with an error, 2 bad usage or
bad configuration. Nothing here prints a traceback for an expected failure.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from ._version import __version__
from .client import OVClient
from .config import OVConfig, load_config
from .errors import ClientError, ConfigError
from .outbox import Outbox
from .statusfile import read_statuses
from .sync import SyncManager, identity_of
from .tools import ToolBox

__all__ = ["example_config", "main"]

EXIT_OK, EXIT_SERVER, EXIT_USAGE = 0, 1, 2


def example_config() -> dict[str, Any]:
    """Every key of config.json with its default (``stateDir`` null = the platform default)."""
    values = {key: value for key, (value, _) in OVConfig().display().items()}
    values["stateDir"] = None
    return values


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _cmd_config(config: OVConfig, args: argparse.Namespace) -> int:
    if args.example:
        _print_json(example_config())
        return EXIT_OK
    shown = config.display()
    if args.json:
        _print_json(
            {key: {"value": value, "source": source} for key, (value, source) in shown.items()}
        )
        return EXIT_OK
    width = max(len(key) for key in shown)
    for key, (value, source) in shown.items():
        print(f"{key:<{width}}  {json.dumps(value, ensure_ascii=False)}  ({source})")
    return EXIT_OK


def _outbox_report(config: OVConfig) -> dict[str, Any]:
    path = config.state_dir / "outbox.sqlite3"
    if not path.exists():
        return {"path": str(path), "pending": 0, "set_aside": [], "sessions_waiting": 0}
    outbox = Outbox(path)
    try:
        stats = outbox.stats(identity_of(config))
    finally:
        outbox.close()
    return {
        "path": str(path),
        "pending": stats.pending,
        "sessions_waiting": stats.sessions_waiting,
        "set_aside": [f"#{e.id} {e.session_id}: {e.last_error}" for e in stats.set_aside],
    }


async def _status(config: OVConfig) -> dict[str, Any]:
    report: dict[str, Any] = {"endpoint": None, "reachable": False}
    report["outbox"] = _outbox_report(config)
    report["agents"] = read_statuses(config.state_dir)
    async with OVClient(config) as client:
        report["endpoint"] = client.endpoint
        started = time.perf_counter()
        try:
            health = await client.health()
        except ClientError as exc:
            report["error"] = str(exc)
            return report
        report.update(
            reachable=True,
            latency_ms=round((time.perf_counter() - started) * 1000, 1),
            version=health.version,
            auth_mode=health.auth_mode,
        )
        try:
            report["user"] = await client.spaces.identity()
            report["memories_uri"] = await client.spaces.resolve_uri("viking://user/memories")
        except ClientError as exc:
            report["error"] = str(exc)
    return report


def _cmd_status(config: OVConfig, args: argparse.Namespace) -> int:
    report = asyncio.run(_status(config))
    if args.json:
        _print_json(report)
    elif report["reachable"]:
        print(f"OpenViking {report['version']} at {report['endpoint']}: reachable")
        print(f"  latency    {report['latency_ms']} ms")
        print(f"  auth mode  {report['auth_mode']}")
        if "user" in report:
            print(f"  user       {report['user']} ({report['memories_uri']})")
        if "error" in report:
            print(f"  warning    {report['error']}")
    else:
        print(f"OpenViking at {report['endpoint']}: NOT reachable", file=sys.stderr)
        print(f"  {report.get('error', '')}", file=sys.stderr)
    if not args.json:
        for agent in report["agents"]:
            saved = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(agent.get("saved_at", 0)))
            print(f"  session    {agent.get('session_id')} (as of {saved})")
            for key in ("bypassed", "last_recall", "last_capture", "last_commit"):
                if agent.get(key):
                    print(f"    {key.replace('_', ' '):<13}{agent[key]}")
            if agent.get("breaker") and agent["breaker"] != "closed":
                print(f"    breaker      {agent['breaker']} ({agent.get('breaker_error', '')})")
        outbox = report["outbox"]
        print(
            f"  outbox     {outbox['pending']} pending in {outbox['sessions_waiting']} "
            f"session(s), {len(outbox['set_aside'])} set aside ({outbox['path']})"
        )
        for line in outbox["set_aside"]:
            print(f"    set aside {line}")
    return EXIT_OK if report["reachable"] and "error" not in report else EXIT_SERVER


def _cmd_demo(config: OVConfig, args: argparse.Namespace) -> int:
    from .demo import run_demo

    try:
        result = asyncio.run(run_demo(args.endpoint))
    except ImportError:
        print(
            "ov-agent-ext demo: the embedded server needs extra packages: install "
            "ov-agent-ext[server], or pass --endpoint URL",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK if result.ok else EXIT_SERVER


async def _search(config: OVConfig, args: argparse.Namespace) -> int:
    async with OVClient(config) as client:
        try:
            found = await client.find(args.query, target_uri=args.scope, limit=args.limit)
        except ClientError as exc:
            print(f"ov-agent-ext search: {exc}", file=sys.stderr)
            return EXIT_SERVER
    hits = found.all_hits()
    if args.json:
        _print_json([h.model_dump() for h in hits])
        return EXIT_OK
    if not hits:
        print(f"No results for {args.query!r}.")
    for hit in hits:
        print(f"{hit.score:.2f}  {hit.uri}")
        print(f"      {' '.join(hit.abstract.split())[:160]}")
    return EXIT_OK


def _cmd_search(config: OVConfig, args: argparse.Namespace) -> int:
    return asyncio.run(_search(config, args))


async def _commit(config: OVConfig, args: argparse.Namespace) -> int:
    async with OVClient(config) as client:
        outbox = Outbox(config.state_dir / "outbox.sqlite3")
        sync = SyncManager(client, config, outbox)
        try:
            print(f"Flushing queued writes for {args.session} and committing...", flush=True)
            report = await sync.commit_now(
                args.session, wait=not args.no_wait, timeout=config.commit_timeout
            )
        finally:
            outbox.close()
    if report.status == "committed":
        extracted = f", {report.memories_extracted} memories extracted" if not args.no_wait else ""
        print(f"Committed {args.session}{extracted}.")
        return EXIT_OK
    if report.status == "skipped":
        reason = report.result.reason if report.result else ""
        print(f"Nothing to commit in {args.session} ({reason}).")
        return EXIT_OK
    print(f"Commit {report.status}: {report.error}", file=sys.stderr)
    return EXIT_SERVER


def _cmd_commit(config: OVConfig, args: argparse.Namespace) -> int:
    return asyncio.run(_commit(config, args))


def _cmd_tools(config: OVConfig, args: argparse.Namespace) -> int:
    _print_json(ToolBox.schemas(args.format))
    return EXIT_OK


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _cmd_serve(args: argparse.Namespace) -> int:
    """Run the reference server (needs the ``server`` extra) until interrupted."""
    if not args.api_key and not _is_loopback(args.host):
        print(
            f"ov-agent-ext serve: refusing to listen on {args.host} without --api-key: dev mode "
            "trusts the identity headers of every caller, so it is for loopback only "
            "(127.0.0.1, ::1, localhost)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        import uvicorn

        from .server import create_app
    except ImportError:
        print(
            "ov-agent-ext serve: the reference server needs extra packages: "
            "install ov-agent-ext[server]",
            file=sys.stderr,
        )
        return EXIT_USAGE
    app = create_app(args.data_dir, root_api_key=args.api_key or None)
    host = f"[{args.host}]" if ":" in args.host else args.host
    mode = "api_key (root key required for admin routes)" if args.api_key else "dev (loopback)"
    print(f"ov-agent-ext reference server (OpenViking 0.5.2 API) at http://{host}:{args.port}")
    print(f"  auth mode  {mode}")
    print(f"  data dir   {args.data_dir}")
    sys.stdout.flush()
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ov-agent-ext",
        description="Long-term memory for coding agents through an OpenViking server.",
    )
    parser.add_argument("--version", action="version", version=f"ov-agent-ext {__version__}")
    parser.add_argument("--config", metavar="PATH", help="config.json to use")
    parser.add_argument("--endpoint", metavar="URL", help="OpenViking server URL")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config = commands.add_parser(
        "config", help="show the resolved config and where each value came from"
    )
    shape = config.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="machine-readable output")
    shape.add_argument("--example", action="store_true", help="print config.example.json")
    config.set_defaults(handler=_cmd_config)

    status = commands.add_parser("status", help="check the server: reachability, latency, identity")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(handler=_cmd_status)

    demo = commands.add_parser(
        "demo", help="run two sessions against the embedded reference server (or --endpoint)"
    )
    demo.set_defaults(handler=_cmd_demo)

    search = commands.add_parser("search", help="search the memory store")
    search.add_argument("query")
    search.add_argument(
        "--scope", default="viking://user/memories", help="viking:// URI prefix (your memories)"
    )
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--json", action="store_true", help="machine-readable output")
    search.set_defaults(handler=_cmd_search)

    commit = commands.add_parser("commit", help="flush queued writes and commit a session")
    commit.add_argument("session", help="the OpenViking session id (e.g. pi-<host session id>)")
    commit.add_argument("--no-wait", action="store_true", help="do not wait for extraction")
    commit.set_defaults(handler=_cmd_commit)

    tools = commands.add_parser("tools", help="print the viking_* tool schemas")
    tools.add_argument("--format", default="openai", choices=["openai", "anthropic", "mcp"])
    tools.set_defaults(handler=_cmd_tools)

    version = commands.add_parser("version", help="print the version")
    version.set_defaults(handler=lambda _config, _args: print(__version__) or EXIT_OK)

    serve = commands.add_parser(
        "serve", help="run the reference OpenViking-compatible server (needs the server extra)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=1933, help="port to listen on (1933)")
    serve.add_argument(
        "--data-dir", required=True, metavar="DIR", help="where the server keeps its data"
    )
    serve.add_argument(
        "--api-key",
        metavar="ROOT_KEY",
        help="root key: switches to api_key mode (required to listen beyond loopback)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn log level (info)",
    )
    serve.set_defaults(serve=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ov-agent-ext`` console script."""
    args = _parser().parse_args(argv)
    if getattr(args, "serve", False):  # the server needs no client configuration
        try:
            return _cmd_serve(args)
        except KeyboardInterrupt:
            return 130
    overrides: dict[str, Any] = {}
    if args.endpoint:
        overrides["endpoint"] = args.endpoint
    try:
        config = load_config(args.config, **overrides)
    except ConfigError as exc:
        print(f"ov-agent-ext: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.handler(config, args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ov-agent-ext config | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
