"""The Redfish emulator's CPU per answer, side by side for several source
trees, and its HTTP layer against h11 on the same bytes.

    python scripts/bench_redfish_server.py --tree /tmp/base --tree . --rounds 5

For each tree (a checkout of this repository; its ``hwlab`` is imported from
there) a :class:`bmaas.hwlab.redfish.RedfishServer` with ``--nodes`` emulated BMCs
runs in a process of its own; a client logs in to each BMC (a session, as
bmaas and sushy do) and reads ``GET /redfish/v1/Systems/<id>`` over kept
connections, ``--reads`` a BMC from 4 threads: a power sync's steady
stream. The figure is the server process's CPU time (user + system, psutil)
over the answers it gave; trees run in alternating order, round after
round, and the median is printed. The client's own CPU is not counted.

``--parse`` also times the HTTP layer alone on one request's bytes (no
sockets): ``bmaas.hwlab.http`` (read a request, encode an answer) vs h11
(``receive_data``/``next_event``, ``send`` of Response, Data and
EndOfMessage, ``start_next_cycle``), when h11 is installed. This is how the
lab's HTTP layer was weighed against h11 (docs/bench/redfish-server.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: run in the server's process: a RedfishServer, its ports on stdout, until stdin ends
SERVE = """
import json, sys
from bmaas.fakes.faults import FaultPlan
from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab.redfish import RedfishServer
server = RedfishServer()
ports = {}
for i in range(int(sys.argv[1])):
    name = f"node-{i:03d}"
    ports[name] = server.add(FakeMachine(name, plan=FaultPlan([], node=name)),
                             username="admin", password="pw")
server.start()
print(json.dumps(ports), flush=True)
sys.stdin.read()
server.stop()
"""


def _answer(sock: socket.socket, buf: bytes) -> tuple[int, bytes, bytes]:
    """One answer off a kept connection: status, head, what is left over."""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-length")),
        0,
    )  # fmt: skip
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(head.split(b" ")[1]), head, rest[length:]


def _login(port: int) -> tuple[socket.socket, str]:
    sock = socket.create_connection(("127.0.0.1", port))
    body = b'{"UserName": "admin", "Password": "pw"}'
    sock.sendall(
        b"POST /redfish/v1/SessionService/Sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    status, head, _ = _answer(sock, b"")
    assert status == 201, status
    token = next(
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"x-auth-token")
    )
    return sock, token


def _reads(
    conns: list[tuple[socket.socket, str, str]], count: int, bad: list[int], fresh: bool = False
) -> None:
    """``count`` reads of each BMC's system resource; ``fresh``: each on a
    new connection (``Connection: close``), as a client that keeps none."""
    for sock, token, name in conns:
        request = (
            f"GET /redfish/v1/Systems/{name} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"X-Auth-Token: {token}\r\nAccept: application/json\r\n"
            f"Connection: {'close' if fresh else 'keep-alive'}\r\n\r\n"
        ).encode()
        buf = b""
        port = sock.getpeername()[1]
        for _ in range(count):
            if fresh:
                with socket.create_connection(("127.0.0.1", port)) as one:
                    one.sendall(request)
                    status, _, _ = _answer(one, b"")
            else:
                sock.sendall(request)
                status, _, buf = _answer(sock, buf)
            bad.append(status != 200)


def server_cpu(tree: Path, nodes: int, reads: int, fresh: bool = False) -> float:
    """Milliseconds of the server's CPU per answer, for ``tree``'s hwlab."""
    import psutil

    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", SERVE, str(nodes)],
        cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ports = json.loads(proc.stdout.readline())
        conns = [(*_login(port), name) for name, port in ports.items()]
        bad: list[int] = []
        _reads(conns, 5, bad)  # untimed: connections and caches warm
        server = psutil.Process(proc.pid)
        before = server.cpu_times()
        threads = [
            threading.Thread(target=_reads, args=(conns[i::4], reads, bad, fresh)) for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = server.cpu_times()
        for sock, _, _ in conns:
            sock.close()
        if any(bad):
            raise RuntimeError(f"{sum(bad)} answers were not 200")
        used = float((after.user + after.system) - (before.user + before.system))
        return used / (nodes * reads) * 1000
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)


# -- the HTTP layer alone ---------------------------------------------------------

REQUEST = (
    b"GET /redfish/v1/Systems/node-001 HTTP/1.1\r\nHost: 127.0.0.1:40001\r\n"
    b"User-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate\r\n"
    b"Accept: application/json\r\nConnection: keep-alive\r\nOData-Version: 4.0\r\n"
    b"X-Auth-Token: abcdefghijklmnopqrstuvwxyz012345\r\n\r\n"
)
BODY = b"x" * 2400  # about a rendered system resource
HEADERS = [("Content-Type", "application/json"), ("OData-Version", "4.0")]


async def _hwlab_http(count: int) -> None:
    from bmaas.hwlab import http

    reader = asyncio.StreamReader(limit=http.MAX_HEAD)
    for _ in range(count):
        reader.feed_data(REQUEST)
        request = await http.read_request(reader)
        assert request is not None
        request.header("x-auth-token")
        request.header("x-hwlab-operation")
        http.Response(200, list(HEADERS), BODY).encode(keep_alive=request.keep_alive)


async def _h11(count: int) -> None:
    import h11

    conn = h11.Connection(h11.SERVER)
    for _ in range(count):
        conn.receive_data(REQUEST)
        event = conn.next_event()
        assert isinstance(event, h11.Request), event
        headers = dict(event.headers)
        headers.get(b"x-auth-token")
        headers.get(b"x-hwlab-operation")
        assert isinstance(conn.next_event(), h11.EndOfMessage)
        length = ("Content-Length", str(len(BODY)))
        conn.send(h11.Response(status_code=200, headers=[*HEADERS, length]))
        conn.send(h11.Data(data=BODY))
        conn.send(h11.EndOfMessage())
        conn.start_next_cycle()


def parse_cpu(rounds: int, count: int = 5000) -> dict[str, float]:
    """Microseconds of CPU per request read and answer encoded."""
    contenders: dict[str, Any] = {"bmaas.hwlab.http": _hwlab_http}
    try:
        import h11  # noqa: F401
    except ImportError:
        print("h11 is not installed: bmaas.hwlab.http alone", file=sys.stderr)
    else:
        contenders["h11"] = _h11
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for round_ in range(rounds):
        order = list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]
        for name in order:
            start = time.process_time()
            asyncio.run(contenders[name](count))
            times[name].append((time.process_time() - start) / count * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def _load() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="a source tree (repeatable)")
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--reads", type=int, default=200, help="reads per BMC per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parse", action="store_true", help="also bmaas.hwlab.http vs h11")
    parser.add_argument(
        "--new-connections", action="store_true", help="each read on a connection of its own"
    )
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [Path.cwd()]]
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": os.cpu_count(),
        "load_before": _load(),
        "connections": "one per read" if args.new_connections else "kept",
    }
    figures: dict[str, list[float]] = {str(t): [] for t in trees}
    for round_ in range(args.rounds):
        for tree in trees if round_ % 2 == 0 else trees[::-1]:
            figures[str(tree)].append(
                server_cpu(tree, args.nodes, args.reads, args.new_connections)
            )
    out["server_cpu_ms_per_answer"] = {
        tree: {"median": round(statistics.median(v), 4), "all": [round(x, 4) for x in v]}
        for tree, v in figures.items()
    }
    if args.parse:
        out["http_layer_us_per_answer"] = {
            k: round(v, 1) for k, v in parse_cpu(args.rounds * 2 + 1).items()
        }
    out["load_after"] = _load()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
