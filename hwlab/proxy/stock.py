"""Stock upstreams for proxies: the classic Ironic development lab, run by hwlab.

* :class:`StockVbmc` runs an unmodified ``vbmcd`` (virtualbmc) with one IPMI
  BMC per libvirt domain, from a private config directory (nothing in
  ``~/.vbmc``). With libvirt's ``test:///default`` driver no hypervisor is
  needed; that driver keeps no state between connections, and vbmc opens one
  per command, so power and boot device read back as the driver's defaults.
* :class:`StockSushy` runs an unmodified ``sushy-emulator``: its fake driver
  (one system per name, power changes landing 1-11 s later at random), or a
  libvirt URI.

Both need the ``bmaas[virtualbmc]`` extra (virtualbmc, libvirt-python, which
builds against Debian's ``libvirt-dev`` with ``pkg-config``). Each runs in
its own process group so :meth:`stop` takes down vbmcd's per-BMC children too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from bmaas.faults import InputError
from bmaas.hwlab import tls
from bmaas.hwlab.proxy import rmcp
from bmaas.hwlab.proxy.host import ProxyError
from bmaas.hwlab.pyexec import python_argv
from bmaas.hwlab.statefiles import open_private, write_private

__all__ = ["StockSushy", "StockVbmc", "free_port", "refuses", "stop_group"]

LOG = logging.getLogger(__name__)

_EXTRA = (
    "install the extra: pip install 'bmaas[virtualbmc]' (building libvirt-python needs "
    "Debian's libvirt-dev and pkg-config: apt-get install libvirt-dev pkg-config)"
)


#: the lowest port :func:`free_port` picks (below it: well-known and registered services)
PICK_FROM = 20000
#: where the kernel's ephemeral range is read; its first number is the lowest port
#: the kernel hands an outgoing connection
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port(kind: int = socket.SOCK_STREAM, host: str = "127.0.0.1") -> int:
    """A port free right now for a server that binds it a moment later: one
    below the kernel's ephemeral range (``PICK_FROM`` up to its lower end, at
    random, checked by a bind), because a port the OS picks (``bind(0)``)
    comes from that range, and every outgoing connection on the host may be
    handed it before the server binds: with three test suites on one runner,
    Ironic's API lost its port to a client's connection (``[Errno 98]``).
    Where the range leaves no room below it, the OS picks."""
    low = _ephemeral_low()
    for _ in range(64 if low - PICK_FROM > 1000 else 0):
        port = random.randrange(PICK_FROM, low)
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int:
    """The kernel's lowest ephemeral port (32768 where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def refuses(host: str, port: int, kind: int = socket.SOCK_STREAM) -> bool:
    """Does ``host:port`` refuse outright (TCP: a RST; UDP: an ICMP port
    unreachable)? Nothing listens there. A silent port is not a refusal."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.settimeout(0.5)
        try:
            sock.connect((host, port))
            if kind == socket.SOCK_DGRAM:  # a connected UDP socket hears the ICMP
                sock.send(rmcp.channel_auth_request())
                sock.recv(512)
        except ConnectionRefusedError:
            return True
        except OSError:
            return False
    return False


def _require(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise InputError(f"{what} is not installed: {_EXTRA}")


class _Process:
    """A stock emulator process in its own process group, logging to a file."""

    def __init__(self, workdir: str | os.PathLike[str], name: str) -> None:
        self.workdir = Path(workdir)
        self.name = name
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        with os.fdopen(open_private(self.log_path, flags), "ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our interpreter, fixed arguments
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ProxyError(
                    f"{self.name} exited ({self.process.returncode}); see {self.log_path}"
                )
            if ready():
                return
            time.sleep(0.1)
        self.stop()
        raise ProxyError(f"{self.name} did not answer within {timeout:g}s; see {self.log_path}")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process and its group (:func:`stop_group`). Safe twice."""
        process, self.process = self.process, None
        if process is not None:
            stop_group(process, timeout, self.name)


def stop_group(process: subprocess.Popen[bytes], timeout: float, name: str) -> None:
    """SIGTERM the process group ``process`` leads (``start_new_session``),
    SIGKILL what is left after ``timeout``: forked children too."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        LOG.warning("%s did not stop on SIGTERM; killing it", name)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # children left behind, if any
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)


class StockVbmc(_Process):
    """A stock ``vbmcd`` serving one IPMI BMC per libvirt domain on 127.0.0.1."""

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        domains: Sequence[str] = ("test",),
        *,
        libvirt_uri: str = "test:///default",
        username: str = "admin",
        password: str = "password",  # noqa: S107 - virtualbmc's documented default
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(workdir, "vbmcd")
        self.domains = list(domains)
        self.libvirt_uri = libvirt_uri
        self.username = username
        self.password = password
        self.host = host
        self.ports: dict[str, int] = {}

    def start(self, timeout: float = 30.0) -> None:
        _require("virtualbmc", "virtualbmc")
        _require("libvirt", "libvirt-python")
        conf_dir = self.workdir / "domains"
        conf_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = self.workdir / "virtualbmc.conf"
        write_private(
            config,
            "[default]\n"
            f"config_dir = {conf_dir}\n"
            f"pid_file = {self.workdir / 'vbmcd.pid'}\n"
            f"server_port = {free_port()}\n"
            "[log]\n"
            f"logfile = {self.log_path}\n",
        )
        for domain in self.domains:
            port = self.ports.setdefault(domain, free_port(socket.SOCK_DGRAM, self.host))
            (conf_dir / domain).mkdir(mode=0o700, exist_ok=True)
            write_private(  # vbmcd reads this at start: no 'vbmc add' round trip
                conf_dir / domain / "config",
                "[VirtualBMC]\n"
                f"username = {self.username}\npassword = {self.password}\n"
                f"address = {self.host}\nport = {port}\ndomain_name = {domain}\n"
                f"libvirt_uri = {self.libvirt_uri}\nactive = True\n",
            )
        self._spawn(
            python_argv("-m", "virtualbmc.cmd.vbmcd", "--foreground"),
            {"VIRTUALBMC_CONFIG": str(config)},
        )
        self._wait(lambda: all(self._answers(p) for p in self.ports.values()), timeout)

    def refuses(self) -> bool:
        """Does every BMC's port refuse (vbmcd and its children gone)?"""
        return all(refuses(self.host, p, socket.SOCK_DGRAM) for p in self.ports.values())

    def _answers(self, port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.2)
            try:
                sock.sendto(rmcp.channel_auth_request(), (self.host, port))
                return bool(sock.recv(512))
            except OSError:
                return False


class StockSushy(_Process):
    """A stock ``sushy-emulator`` on 127.0.0.1: fake driver systems by name,
    or the domains of ``libvirt_uri``."""

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        systems: Sequence[str] = ("fake",),
        *,
        libvirt_uri: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        tls_enabled: bool = False,
    ) -> None:
        super().__init__(workdir, "sushy-emulator")
        self.systems = list(systems)
        self.libvirt_uri = libvirt_uri
        self.host = host
        self.port = port
        self.tls = tls_enabled
        self.cert_path: Path | None = None

    def system_id(self, name: str) -> str:
        """The Redfish id of system ``name`` (fake driver: a UUID made from it)."""
        if self.libvirt_uri:
            return name
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"hwlab.{name}"))

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        _require("sushy_tools", "sushy-tools")
        self.port = self.port or free_port()
        settings = {
            "SUSHY_EMULATOR_LISTEN_IP": self.host,
            "SUSHY_EMULATOR_LISTEN_PORT": self.port,
            "SUSHY_EMULATOR_STATE_DIR": str(self.workdir / "state"),
        }
        if self.libvirt_uri:
            settings["SUSHY_EMULATOR_LIBVIRT_URI"] = self.libvirt_uri
            settings["SUSHY_EMULATOR_ALLOWED_INSTANCES"] = self.systems
            settings.update(_uefi_settings())
        else:
            settings["SUSHY_EMULATOR_FAKE_DRIVER"] = True
            settings["SUSHY_EMULATOR_FAKE_SYSTEMS"] = [
                {"uuid": self.system_id(n), "name": n, "power_state": "Off", "nics": []}
                for n in self.systems
            ]
        if self.tls:
            cert = tls.ensure_certificate(self.workdir / "tls", self.host)
            self.cert_path = cert.ca_path  # what clients verify against
            settings.update(
                SUSHY_EMULATOR_SSL_CERT=str(cert.cert_path),
                SUSHY_EMULATOR_SSL_KEY=str(cert.key_path),
            )
        config = self.workdir / "sushy-emulator.conf"
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A Flask config file is Python: repr() writes each value as a literal.
        write_private(config, "".join(f"{key} = {value!r}\n" for key, value in settings.items()))
        self._spawn(python_argv("-m", "sushy_tools.emulator.main", "--config", str(config)))
        self._wait(self._answers, timeout)

    def refuses(self) -> bool:
        """Does the service's port refuse (nothing listens)?"""
        return refuses(self.host, self.port)

    def _answers(self) -> bool:
        context = None
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.cert_path))
        try:
            with urllib.request.urlopen(  # noqa: S310 - our own loopback URL
                self.url + "/redfish/v1/", timeout=1, context=context
            ) as response:
                return bool(response.status == 200)
        except OSError:
            return False


def _uefi_settings() -> dict[str, object]:
    """sushy-tools' firmware paths as Debian installs them (its defaults
    name Ubuntu's): a Redfish ``BootSourceOverrideMode`` change, or Secure
    Boot turned on or off, gives a VM lab's domain OVMF and the variables
    template of :mod:`bmaas.hwlab.vm.domain`, or SeaBIOS for ``Legacy`` (its
    default, no path, is refused by libvirt for a domain that names its
    loader: a 500, "no loader path specified")."""
    from bmaas.hwlab.vm.domain import OVMF_CODE, OVMF_VARS, SEABIOS

    return {
        "SUSHY_EMULATOR_BOOT_LOADER_MAP": {
            "UEFI": {"x86_64": OVMF_CODE},
            "Legacy": {"x86_64": SEABIOS},
        },
        "SUSHY_EMULATOR_SECURE_BOOT_ENABLED_NVRAM": OVMF_VARS["uefi-secure"],
        "SUSHY_EMULATOR_SECURE_BOOT_DISABLED_NVRAM": OVMF_VARS["uefi"],
    }
