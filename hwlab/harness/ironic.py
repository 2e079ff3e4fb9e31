"""A real, standalone OpenStack Ironic on 127.0.0.1, for tests and benchmarks.

``scripts/ironic-env.sh`` installs Ironic (and bmaas, editable, so the
conductor loads ``bmaas-ipmi``/``bmaas-redfish``) into its own venv,
``.venv-ironic``. :class:`IronicService` then runs it the way bifrost and
Metal3 run it, minus everything a lab does not need:

* one process, API and conductor together (the ``ironic`` command),
  ``rpc_transport = none``, ``auth_strategy = noauth``, SQLite, on a free
  port of 127.0.0.1, everything under one temporary directory;
* ``noop`` network, ``pxe`` boot and ``ramdisk`` deploy with ``file://``
  kernel and ramdisk: a deploy does real BMC work (boot device, power) and
  needs no agent, DHCP or TFTP server;
* the stock ``ipmi`` and ``redfish`` hardware types beside bmaas's two, so a
  benchmark compares them through the same conductor.

Helpers enroll hwlab nodes (:func:`enroll`), wait for states and read a
node's failure (:func:`failure_text`: ``last_error``, or node history once
the power sync has cleared it). The service is a context manager; ``stop``
kills the whole process group whatever happened.

Typical use (what ``tests/ironic/conftest.py`` does)::

    with IronicService(workdir) as ironic:
        conn = ironic.connect()
        node = enroll(conn, lab_entry, driver="bmaas-ipmi")
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bmaas.faults import BmaasError
from bmaas.hwlab.proxy.stock import free_port, stop_group
from bmaas.hwlab.pyexec import python_argv
from bmaas.signals import relayed_signals

__all__ = [
    "HISTORY_VERSION",
    "IronicError",
    "IronicService",
    "IronicSettings",
    "connect",
    "driver_info_for",
    "enroll",
    "failure_text",
    "find_venv",
    "history",
    "history_text",
    "ironic_version",
    "read_node",
    "wait_for_power_settled",
    "wait_for_provision",
]

#: times a test's or bench's connection sends a request again after the API
#: closed its connection unanswered (:func:`connect`)
OBSERVER_CONNECT_RETRIES = 3

#: the API version with node history (``GET /v1/nodes/{node}/history``)
HISTORY_VERSION = "1.78"

#: hardware types the service enables, stock first; Ironic's own
#: ``fake-hardware`` asks no BMC (its power state is the database's): what a
#: sync pass costs Ironic itself, the floor under every driver
HARDWARE_TYPES = ("ipmi", "redfish", "bmaas-ipmi", "bmaas-redfish", "fake-hardware")


class IronicError(BmaasError):
    """Ironic could not be found, started, or did not do what was asked."""

    code = "ironic_error"


class PortTaken(IronicError):
    """Ironic's API port was taken between :func:`free_port` and Ironic's
    bind (any outgoing connection may get it as its ephemeral port): the
    conductor runs on without an API. :meth:`IronicService.start` picks
    another."""


#: times :meth:`IronicService.start` picks a new API port after :class:`PortTaken`
START_ATTEMPTS = 3


def find_venv(release: str = "") -> Path:
    """The venv ``scripts/ironic-env.sh`` made: for ``release`` (another
    tested release, ``ironic-env.sh --release``) ``.venv-ironic-RELEASE`` at
    the repository root; else ``$BMAAS_IRONIC_VENV``, else ``.venv-ironic``."""
    env = os.environ.get("BMAAS_IRONIC_VENV")
    root = Path(__file__).resolve().parents[2]
    if release:
        venv = root / f".venv-ironic-{release}"
        how = f"bash scripts/ironic-env.sh --release {release}"
    else:
        venv = Path(env) if env else root / ".venv-ironic"
        how = "bash scripts/ironic-env.sh"
    if not (venv / "bin" / "ironic").exists():
        raise IronicError(
            f"no Ironic in {venv}: run `{how}` first "
            "(or set BMAAS_IRONIC_VENV to a venv with ironic and bmaas[ironic])"
        )
    return venv


def ironic_version(venv: Path) -> str | None:
    """The Ironic release installed in ``venv`` (its dist-info), for reports."""
    found = sorted(venv.glob("lib/python*/site-packages/ironic-*.dist-info"))
    return found[-1].name.removesuffix(".dist-info").split("-", 1)[1] if found else None


@dataclasses.dataclass(frozen=True)
class IronicSettings:
    """What a test or benchmark may want to change in ironic.conf."""

    #: seconds between periodic power syncs ([conductor]sync_power_state_interval)
    sync_interval: int = 60
    #: failed sync passes before maintenance ([conductor]power_state_sync_max_retries)
    sync_max_retries: int = 3
    #: seconds Ironic waits for a power state ([conductor]power_state_change_timeout)
    power_timeout: int = 30
    #: [ipmi]min_command_interval for the stock ipmi type (Ironic's default: 5)
    ipmi_min_command_interval: int = 5
    #: the [bmaas] section
    bmaas_call_deadline: float = 2.0
    bmaas_operation_deadline: float = 20.0
    bmaas_sync_deadline: float = 8.0
    #: an SQLAlchemy URL of an empty database for Ironic (PostgreSQL:
    #: ``postgresql+psycopg://...``, the driver ``scripts/ironic-env.sh``
    #: installs) instead of its SQLite file. Operators run Ironic on a database
    #: server; on SQLite, even in WAL mode, a concurrent allocation's write was
    #: refused "database is locked" at once (SQLITE_BUSY_SNAPSHOT, which no busy
    #: timeout helps and Ironic 39 does not retry) and the allocation was left
    #: "allocating" for good, on a loaded test run and once on an idle one
    database_url: str | None = None
    #: anything else: {"section": {"option": "value"}}
    extra: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    @classmethod
    def budget(cls, options: Any, **kw: Any) -> IronicSettings:
        """A bench's settings: the ``[bmaas]`` budget its ``options`` name
        (``call_deadline``, ``operation_deadline``, ``sync_deadline``) and
        their ``sync_interval``; ``kw`` as the fields, the rest the defaults."""
        return cls(
            sync_interval=options.sync_interval,
            bmaas_call_deadline=options.call_deadline,
            bmaas_operation_deadline=options.operation_deadline,
            bmaas_sync_deadline=options.sync_deadline,
            **kw,
        )


class IronicService:
    """One standalone Ironic process (API + conductor) under ``workdir``."""

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        settings: IronicSettings | None = None,
        *,
        venv: Path | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.settings = settings or IronicSettings()
        self.venv = venv or find_venv()
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.config_path = self.workdir / "ironic.conf"
        self.log_path = self.workdir / "ironic.log"
        self.database_path = self.workdir / "ironic.sqlite"
        self.kernel = self.workdir / "images" / "kernel"
        self.ramdisk = self.workdir / "images" / "ramdisk"

    @property
    def database_url(self) -> str:
        """Ironic's ``[database]connection``: the settings' server, else a SQLite file."""
        return self.settings.database_url or f"sqlite:///{self.database_path}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- configuration -----------------------------------------------------------

    def config(self) -> dict[str, dict[str, Any]]:
        s = self.settings
        w = self.workdir
        sections: dict[str, dict[str, Any]] = {
            "DEFAULT": {
                "auth_strategy": "noauth",
                "rpc_transport": "none",
                "host": "bmaas-lab-conductor",
                "debug": "false",
                "log_file": str(self.log_path),
                "use_stderr": "false",
                "state_path": str(w / "state"),
                "tempdir": str(w / "tmp"),
                "enabled_hardware_types": ",".join(HARDWARE_TYPES),
                "enabled_power_interfaces": "ipmitool,redfish,bmaas,fake",
                "enabled_management_interfaces": "ipmitool,redfish,bmaas,fake",
                "enabled_boot_interfaces": "pxe",
                "default_boot_interface": "pxe",
                "enabled_deploy_interfaces": "ramdisk",
                "default_deploy_interface": "ramdisk",
                "enabled_network_interfaces": "noop",
                "default_network_interface": "noop",
                "enabled_inspect_interfaces": "no-inspect",
                "enabled_console_interfaces": "no-console",
                "enabled_bios_interfaces": "no-bios",
                "enabled_raid_interfaces": "no-raid",
                "enabled_rescue_interfaces": "no-rescue",
                "enabled_vendor_interfaces": "no-vendor",
                "enabled_firmware_interfaces": "no-firmware",
            },
            "api": {"host_ip": "127.0.0.1", "port": self.port},
            "database": {"connection": self.database_url},
            "conductor": {
                "automated_clean": "false",
                "sync_power_state_interval": s.sync_interval,
                "power_state_sync_max_retries": s.sync_max_retries,
                "power_state_change_timeout": s.power_timeout,
                "node_history": "true",
                "deploy_callback_timeout": 0,
                "check_provision_state_interval": 5,
                "file_url_allowed_paths": str(w / "images"),
                "graceful_shutdown_timeout": 5,
            },
            "dhcp": {"dhcp_provider": "none"},
            # where an agent's ramdisk finds the API (no Keystone catalog here);
            # written with the port, so a port picked again after PortTaken is
            # the one it names
            "service_catalog": {"endpoint_override": self.url},
            "pxe": {
                "tftp_root": str(w / "tftpboot"),
                "tftp_master_path": str(w / "tftpboot" / "master_images"),
                "images_path": str(w / "images-cache"),
                "instance_master_path": str(w / "images-master"),
            },
            "deploy": {
                "http_root": str(w / "httpboot"),
                "http_url": f"http://127.0.0.1:{free_port()}",
            },
            "ipmi": {"min_command_interval": s.ipmi_min_command_interval},
            "oslo_concurrency": {"lock_path": str(w / "locks")},
            "bmaas": {
                "call_deadline": s.bmaas_call_deadline,
                "operation_deadline": s.bmaas_operation_deadline,
                "sync_deadline": s.bmaas_sync_deadline,
            },
        }
        for section, options in s.extra.items():
            sections.setdefault(section, {}).update(options)
        return sections

    def write_config(self) -> None:
        for sub in ("state", "tmp", "tftpboot/master_images", "httpboot", "locks", "images"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        lines = []
        for section, options in self.config().items():
            lines.append(f"[{section}]")
            lines.extend(f"{key} = {value}" for key, value in options.items())
            lines.append("")
        self.config_path.write_text("\n".join(lines))
        # A deploy with the ramdisk interface copies these; any bytes will do.
        self.kernel.write_bytes(b"bmaas lab kernel\n")
        self.ramdisk.write_bytes(b"bmaas lab ramdisk\n")

    # -- lifecycle -----------------------------------------------------------------

    def start(self, *, timeout: float = 120.0, abort: threading.Event | None = None) -> None:
        """Create the schema, start Ironic, return once the API lists every
        enabled hardware type (the conductor has registered them). ``abort``
        set meanwhile stops it and raises :class:`IronicError`."""
        self.prepare(timeout=timeout)
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self.launch(timeout=timeout, abort=abort)
                return
            except PortTaken:
                if attempt == START_ATTEMPTS:
                    raise
                self.port = free_port()
                self.write_config()

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        env.pop("PYTHONPATH", None)  # the conductor imports bmaas from its own venv
        return env

    def prepare(self, *, timeout: float = 120.0) -> None:
        """Write the configuration and create the database schema (Ironic not running)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        dbsync = [str(self.venv / "bin" / "ironic-dbsync"), "--config-file", str(self.config_path)]
        subprocess.run(  # noqa: S603 - our own venv's ironic-dbsync
            [*dbsync, "create_schema"],
            check=True,
            capture_output=True,
            env=self._env(),
            timeout=timeout,
        )

    def bulk_enroll(self, nodes: Sequence[Mapping[str, Any]], *, timeout: float) -> list[str]:
        """Create ``nodes`` (``name``, ``driver``, ``driver_info``) in the
        database, ``manageable``, before :meth:`launch` (see
        :mod:`bmaas.hwlab.harness.ironic_bulk`); their UUIDs, in order."""
        import json

        answer = subprocess.run(  # noqa: S603 - our own venv's python, our own module
            python_argv(
                "-m",
                "bmaas.hwlab.harness.ironic_bulk",
                "--config-file",
                str(self.config_path),
                python=str(self.venv / "bin" / "python"),
            ),
            input=json.dumps(list(nodes)),
            capture_output=True,
            text=True,
            env=self._env(),
            timeout=timeout,
            check=False,
        )
        if answer.returncode != 0:
            raise IronicError(f"bulk enrollment failed: {answer.stderr.strip()[-2000:]}")
        return [json.loads(line)["uuid"] for line in answer.stdout.splitlines() if line.strip()]

    def launch(self, *, timeout: float = 120.0, abort: threading.Event | None = None) -> None:
        """Start Ironic on a prepared workdir; return once its drivers are up."""
        with (self.workdir / "ironic.stderr").open("wb") as stderr:
            self.process = subprocess.Popen(  # noqa: S603 - our own venv's ironic
                [str(self.venv / "bin" / "ironic"), "--config-file", str(self.config_path)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=self._env(),
                start_new_session=True,  # one process group: stop() ends every worker
            )
        try:
            self._await_drivers(time.monotonic() + timeout, abort or threading.Event())
        except BaseException:
            self.stop()
            raise

    def _await_drivers(self, deadline_s: float, abort: threading.Event) -> None:
        import requests

        last = ""
        while time.monotonic() < deadline_s:
            if self.process is not None and self.process.poll() is not None:
                raise IronicError(f"ironic exited with {self.process.returncode}: {self.tail()}")
            if self._port_taken():
                raise PortTaken(f"ironic's API port {self.port} was taken: {self.tail(5)}")
            try:
                answer = requests.get(f"{self.url}/v1/drivers", timeout=2)
                if answer.ok:
                    names = {d["name"] for d in answer.json().get("drivers", [])}
                    if names >= set(HARDWARE_TYPES):
                        return
                    last = f"drivers so far: {sorted(names)}"
            except requests.RequestException as exc:
                last = str(exc)
            if abort.wait(0.5):
                raise IronicError("asked to stop while Ironic was starting")
        raise IronicError(f"ironic did not come up at {self.url} ({last}): {self.tail()}")

    def _port_taken(self) -> bool:
        """The API server's bind failed (in Ironic's log or its stderr's
        last 64 KiB: the conductor lives on, the API never answers)."""
        sign = f"('127.0.0.1', {self.port}): [Errno 98]".encode()
        for path in (self.workdir / "ironic.stderr", self.log_path):
            try:
                with path.open("rb") as f:
                    f.seek(max(0, path.stat().st_size - 65536))
                    if sign in f.read():
                        return True
            except FileNotFoundError:
                continue
        return False

    def tail(self, lines: int = 30) -> str:
        """The end of Ironic's log and stderr, for failure messages."""
        text = ""
        for path in (self.workdir / "ironic.stderr", self.log_path):
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def stop(self, *, timeout: float = 15.0) -> None:
        """Stop Ironic (its whole process group), killing it if it lingers."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            stop_group(process, timeout, "ironic")

    def pids(self) -> list[int]:
        """Ironic's processes (the launcher and its forked service)."""
        if self.process is None:
            return []
        import psutil

        try:
            parent = psutil.Process(self.process.pid)
            return [parent.pid] + [c.pid for c in parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by every Ironic process and by
        the children they waited for: stock ``ipmi`` runs ``ipmitool`` once a
        read, and its CPU is the conductor's cost as much as its own threads'
        (``/proc/PID/stat`` cutime and cstime)."""
        import psutil

        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(psutil.NoSuchProcess):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        return total

    def __enter__(self) -> IronicService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients -------------------------------------------------------------------

    def connect(self) -> Any:
        """An openstacksdk connection to this Ironic (no auth, endpoint given):
        :func:`connect`."""
        return connect(self.url)


def connect(url: str) -> Any:
    """An openstacksdk connection to the Ironic API at ``url`` for a test or
    a bench: no auth, endpoint given, and a connection the API closed while
    it sat in the pool sent again (``connect_retries``, keystoneauth's own,
    after 0.5 s, then 1 s and 2 s; openstacksdk 4.1.0 gives each request one
    retry of its own instead).

    Why: Ironic 39 serves its API with cheroot, which closes a keep-alive
    connection idle for 10 s; requests' pool keeps it, and a request sent on
    it just as cheroot closes it ends "Remote end closed connection without
    response" (``ConnectFailure``). On a loaded runner cheroot's expiry runs
    late and that window widens: it failed the lifecycle bench's smoke test in
    CI. The observer's connection is not what a test measures; bmaas's own
    Ironic client keeps its retries at zero and its policy decides
    (``bmaas.drivers.ironic_backend.transport``)."""
    import openstack

    with warnings.catch_warnings():
        # openstacksdk warns about its own deprecated metrics options
        # (InfluxDB) even when none is set
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return openstack.connect(
            auth_type="none",
            baremetal_endpoint_override=url,
            baremetal_api_version="1",
            baremetal_connect_retries=OBSERVER_CONNECT_RETRIES,
            load_yaml_config=False,
            load_envvars=False,
        )


# -- nodes ------------------------------------------------------------------------


def _mac(name: str) -> str:
    digest = uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


def driver_info_for(entry: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """The keys of a lab inventory entry's ``driver_info`` that hardware type
    ``driver`` reads (``ipmi_*`` or ``redfish_*``: a node may speak both)."""
    prefix = ("redfish" if "redfish" in driver else "ipmi") + "_"
    return {k: v for k, v in entry["driver_info"].items() if k.startswith(prefix)}


def enroll(
    conn: Any,
    entry: Mapping[str, Any],
    *,
    driver: str,
    name: str | None = None,
    kernel: Path,
    ramdisk: Path,
    provide: bool = True,
    timeout: float = 120.0,
) -> Any:
    """Enroll one hwlab node (an entry of ``Lab.inventory()["nodes"]``) with
    ``driver``, one port, and a ``file://`` kernel/ramdisk for ramdisk
    deploys; with ``provide``, take it to ``available`` (manage validates
    power, so the BMC must answer)."""
    info = driver_info_for(entry, driver)
    info["deploy_kernel"] = f"file://{kernel}"
    info["deploy_ramdisk"] = f"file://{ramdisk}"
    node_name = name or entry["name"]
    node = conn.baremetal.create_node(
        name=node_name,
        driver=driver,
        driver_info=info,
        resource_class=entry.get("resource_class", "baremetal"),
        instance_info={"kernel": f"file://{kernel}", "ramdisk": f"file://{ramdisk}"},
    )
    conn.baremetal.create_port(node_uuid=node.id, address=_mac(node_name))
    if provide:
        conn.baremetal.set_node_provision_state(node, "manage", wait=True, timeout=timeout)
        conn.baremetal.set_node_provision_state(node, "provide", wait=True, timeout=timeout)
    return conn.baremetal.get_node(node.id)


def history(conn: Any, node: Any) -> list[dict[str, Any]]:
    """The node's history events, oldest first (API 1.78)."""
    ident = getattr(node, "id", node)
    answer = conn.baremetal.get(f"/nodes/{ident}/history?detail=true", microversion=HISTORY_VERSION)
    answer.raise_for_status()
    events = answer.json().get("history", [])
    return sorted(events, key=lambda e: e.get("created_at") or "")


def failure_text(conn: Any, node: Any, *, since: str | None = None) -> str | None:
    """What went wrong on ``node``: its ``last_error``, else the newest error
    event of its history (Ironic's power sync clears ``last_error`` seconds
    after a good read; history keeps it). ``since`` (an ISO time) ignores
    older history."""
    fresh = conn.baremetal.get_node(getattr(node, "id", node))
    if fresh.last_error:
        return str(fresh.last_error)
    for event in reversed(history(conn, node)):
        if since and (event.get("created_at") or "") < since:
            break
        if event.get("severity") == "ERROR":
            return str(event.get("event"))
    return None


def history_text(conn: Any, node: Any) -> str:
    """Every history event of the node, one a line (for "never shows X" checks)."""
    return "\n".join(str(e.get("event")) for e in history(conn, node))


#: reads of a node the lab's Ironic answered 5xx, asked again this many times
#: (0.5 s apart) before the error is the answer
READ_RETRIES = 10


def read_node(conn: Any, ident: str) -> Any:
    """``GET /v1/nodes/{ident}``, asked again when Ironic answers 5xx: under
    load its SQLite refuses a read "database is locked" now and then (an
    observer's read, not the node's state)."""
    for _ in range(READ_RETRIES):
        try:
            return conn.baremetal.get_node(ident)
        except Exception as exc:
            if (getattr(exc, "status_code", None) or 0) < 500:
                raise
            time.sleep(0.5)
    return conn.baremetal.get_node(ident)


def wait_for_power_settled(conn: Any, node: Any, *, timeout: float, poll: float = 0.25) -> Any:
    """Poll until no power change is pending (``target_power_state`` empty);
    the node as last read. ``IronicError`` on timeout."""
    end = time.monotonic() + timeout
    ident = getattr(node, "id", node)
    while True:
        fresh = read_node(conn, ident)
        if not fresh.target_power_state:
            return fresh
        if time.monotonic() > end:
            raise IronicError(
                f"node {fresh.name}: power still heading to {fresh.target_power_state} "
                f"after {timeout:g}s"
            )
        time.sleep(poll)


def wait_for_provision(
    conn: Any, node: Any, states: set[str], *, timeout: float, poll: float = 0.5
) -> Any:
    """Poll until the node's provision state is one of ``states`` and no
    target is pending; the node as last read. ``IronicError`` on timeout."""
    end = time.monotonic() + timeout
    ident = getattr(node, "id", node)
    while True:
        fresh = conn.baremetal.get_node(ident)
        if fresh.provision_state in states and not fresh.target_provision_state:
            return fresh
        if time.monotonic() > end:
            raise IronicError(
                f"node {fresh.name}: provision state {fresh.provision_state} "
                f"(target {fresh.target_provision_state}), not {sorted(states)}, "
                f"after {timeout:g}s; last_error: {fresh.last_error}"
            )
        time.sleep(poll)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bmaas.hwlab.harness.ironic [DIR]``: run one Ironic until SIGINT
    or SIGTERM, then stop it (its whole process group) and exit 0."""
    parser = argparse.ArgumentParser(
        prog="python -m bmaas.hwlab.harness.ironic",
        description="Run a standalone Ironic on 127.0.0.1 (from .venv-ironic or "
        "$BMAAS_IRONIC_VENV) until SIGINT or SIGTERM; both stop it.",
    )
    parser.add_argument(
        "workdir",
        nargs="?",
        default="ironic-lab",
        metavar="DIR",
        help="where its config, database and logs go (default: ./ironic-lab)",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    with relayed_signals(lambda _signum: stop.set()):
        try:
            ironic = IronicService(args.workdir)
            try:
                ironic.start(abort=stop)
                print(f"ironic at {ironic.url}; config {ironic.config_path}; ", end="")
                print("SIGINT/SIGTERM stops it", flush=True)
                stop.wait()
            finally:
                ironic.stop()
        except IronicError as exc:
            if stop.is_set():
                return 0
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
