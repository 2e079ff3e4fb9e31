"""One fault-detection trial in a process of its own.

A bare pyghmi or sushy client facing a dead BMC may wait minutes (sushy:
ten tries of a 60 s read timeout) or, in a thread, forever; such a thread
cannot be stopped. So each trial runs here, in a child process:

    echo '{"client": "sushy", ...}' | python -m bmaas.hwlab.harness.bench.clients

The job (with the password) comes on stdin, never on the command line. The
child imports everything first, then times one power read from the moment
the client is created (its login included) to the answer or the exception,
and prints one JSON line. If the call is still running after ``cap``
seconds it prints ``gave_up`` and exits at once: the benchmark reports
"gave up after N s" honestly instead of waiting. The parent kills the child
if even that does not come.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from bmaas.hwlab.harness.budgets import per_call
from bmaas.hwlab.pyexec import python_argv

__all__ = ["CLIENTS", "bare_sushy", "run_trial"]

#: seconds a child may take to import its client library before the call
STARTUP_ALLOWANCE = 60.0


def _bmaas(job: Mapping[str, Any]) -> Callable[[], str]:
    from bmaas.registry import build_driver, load_driver

    protocol = job["protocol"]
    load_driver(protocol)  # import the driver (and its library) before the clock starts
    if protocol == "ipmi":
        info = {
            "ipmi_address": job["host"],
            "ipmi_port": job["port"],
            "ipmi_username": job["username"],
            "ipmi_password": job["password"],
        }
    else:
        info = {
            "redfish_address": f"http://{job['host']}:{job['port']}",
            "redfish_username": job["username"],
            "redfish_password": job["password"],
            "redfish_system_id": job["system"],
        }

    def call() -> str:
        driver = build_driver(job["node"], protocol, info)  # the default deadline
        try:
            return str(driver.get_power_state(deadline=per_call(driver)))
        finally:
            driver.close()

    return call


def _pyghmi(job: Mapping[str, Any]) -> Callable[[], str]:
    from pyghmi.ipmi import command

    def call() -> str:
        # As pyghmi users write it: bytes credentials, every other setting default.
        bmc = command.Command(
            job["host"], job["username"].encode(), job["password"].encode(), port=job["port"]
        )
        return str(bmc.get_power()["powerstate"])

    return call


def _sushy(job: Mapping[str, Any]) -> Callable[[], str]:
    import sushy

    def call() -> str:
        root = sushy.Sushy(
            f"http://{job['host']}:{job['port']}",
            username=job["username"],
            password=job["password"],
        )
        return str(root.get_system(job["system"]).power_state)

    return call


def bare_sushy(info: Mapping[str, Any]) -> Any:
    """A plain ``sushy.Sushy`` for a lab node's ``driver_info``: its defaults, its own login."""
    import sushy

    return sushy.Sushy(
        info["redfish_address"],
        username=info["redfish_username"],
        password=info["redfish_password"],
        verify=info.get("redfish_verify_ca", True),
    )


CLIENTS: dict[str, Callable[[Mapping[str, Any]], Callable[[], str]]] = {
    "bmaas": _bmaas,
    "pyghmi": _pyghmi,
    "sushy": _sushy,
}


def _describe(exc: BaseException) -> str:
    """``BMCTimeout``, ``IpmiException: Node Busy``: the class a caller gets,
    and for untyped errors the start of the message (all they have to go by)."""
    from bmaas.faults import BmaasError

    name = type(exc).__name__
    if isinstance(exc, BmaasError):
        return name
    text = " ".join(str(exc).split())[:60]
    return f"{name}: {text}" if text else name


def _child(job: Mapping[str, Any]) -> dict[str, Any]:
    call = CLIENTS[job["client"]](job)
    outcome: dict[str, Any] = {}

    def body() -> None:
        start = time.perf_counter()
        try:
            outcome.update(ok=True, result=call())
        except BaseException as exc:  # the bare libraries raise anything at all
            outcome.update(ok=False, result=_describe(exc))
        outcome["elapsed"] = time.perf_counter() - start

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(job["cap"])
    if worker.is_alive():
        return {"gave_up": True, "elapsed": job["cap"]}
    return {"gave_up": False, **outcome}


def run_trial(job: Mapping[str, Any]) -> dict[str, Any]:
    """Run one trial in a child process; its JSON answer as a dict."""
    cap = float(job["cap"])
    proc = subprocess.Popen(  # noqa: S603 - our own module, no shell
        python_argv("-m", "bmaas.hwlab.harness.bench.clients"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(json.dumps(dict(job)), timeout=cap + STARTUP_ALLOWANCE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"gave_up": True, "elapsed": cap}
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = err.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return {"gave_up": False, "ok": False, "result": f"trial failed: {tail[0]}", "elapsed": 0}
    return dict(json.loads(lines[-1]))


def main() -> None:
    logging.disable(logging.CRITICAL)  # the libraries' own warnings are not the figure
    job = json.loads(sys.stdin.read())
    print(json.dumps(_child(job)), flush=True)
    # A hung client thread must not keep this process alive.
    os._exit(0)


if __name__ == "__main__":
    main()
