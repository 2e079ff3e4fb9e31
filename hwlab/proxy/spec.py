"""What one proxy is: where it listens, which BMC it fronts, how to reach it.

Parsed from ``hwlab proxy`` options or from a lab file node's ``proxy:``
mapping::

    - name: r2-n01
      proxy:
        protocol: ipmi               # or redfish
        upstream: 10.0.0.21:623      # the real BMC (redfish: http(s)://host:port)
        username: admin              # IPMI: lets the proxy read and forge in-session
        password: secret             #   packets; both: written to the inventory
        verify_ca: /etc/ssl/bmc.pem  # redfish https upstream: true, false or a CA file
        tls: true                    # redfish: serve HTTPS (default: as the upstream)

or, to have hwlab start a stock emulator for the node (``bmaas[virtualbmc]``)::

      proxy: {protocol: ipmi, stock: vbmc, domain: test, libvirt_uri: "test:///default"}
      proxy: {protocol: redfish, stock: sushy}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bmaas import validate
from bmaas.faults import InputError
from bmaas.secrets import Secret
from bmaas.yamlsrc import line_of

__all__ = ["STOCK", "ProxySpec", "parse_hostport", "parse_proxy"]

#: stock emulators hwlab can start behind a proxy, per protocol
STOCK = {"vbmc": "ipmi", "sushy": "redfish"}
_KEYS = {
    "protocol",
    "upstream",
    "username",
    "password",
    "kg",
    "verify_ca",
    "tls",
    "listen",
    "stock",
    "domain",
    "libvirt_uri",
}
DEFAULT_PORTS = {"ipmi": 623, "redfish": 443}


@dataclasses.dataclass(frozen=True)
class ProxySpec:
    """One proxied BMC. Picklable; the password is a :class:`Secret`."""

    node: str
    protocol: str
    upstream_host: str = ""
    upstream_port: int = 0
    upstream_tls: bool = False
    username: str | None = None
    password: Secret = dataclasses.field(default_factory=Secret)
    kg: Secret = dataclasses.field(default_factory=Secret)
    #: redfish https upstream: verify its certificate (True), not (False), or against a CA file
    verify_ca: bool | str = True
    #: redfish: serve HTTPS with a generated certificate (None: as the upstream)
    tls: bool | None = None
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    #: "vbmc" or "sushy": hwlab starts that stock emulator as the upstream
    stock: str | None = None
    domain: str | None = None
    libvirt_uri: str | None = None

    @property
    def credentials(self) -> bool:
        return bool(self.username) and bool(self.password)

    @property
    def serves_tls(self) -> bool:
        return self.protocol == "redfish" and (self.upstream_tls if self.tls is None else self.tls)

    @property
    def upstream(self) -> str:
        if self.protocol == "redfish":
            scheme = "https" if self.upstream_tls else "http"
            return f"{scheme}://{self.upstream_host}:{self.upstream_port}"
        return f"{self.upstream_host}:{self.upstream_port}"

    def with_upstream(self, host: str, port: int, *, tls: bool = False) -> ProxySpec:
        return dataclasses.replace(self, upstream_host=host, upstream_port=port, upstream_tls=tls)


def parse_hostport(text: str, *, default_port: int, field: str) -> tuple[str, int]:
    """``host:port``, ``host`` or ``[v6]:port``. Port 0 (any free port) only
    where the default is 0 (a listen address)."""
    low = 0 if default_port == 0 else 1
    text = text.strip()
    host, port = text, default_port
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = _port(rest[1:], field, low=low)
    elif text.count(":") == 1:
        host, raw = text.split(":")
        port = _port(raw, field, low=low)
    if not host:
        raise InputError(f"needs a host, not {text!r}", field=field)
    return host, port


def _port(raw: str, field: str, *, low: int) -> int:
    try:
        return validate.whole(validate.digits(raw), low=low, high=65535, what="a port")
    except ValueError as exc:
        raise InputError(str(exc), field=field) from None


def parse_upstream(text: str, protocol: str, *, field: str = "upstream") -> tuple[str, int, bool]:
    """Host, port and TLS of an upstream: ``host:port`` for IPMI,
    ``http(s)://host:port`` (or bare ``host:port``, meaning http) for Redfish."""
    tls = False
    if "://" in text:
        scheme, _, text = text.partition("://")
        if protocol != "redfish" or scheme not in ("http", "https"):
            raise InputError(f"scheme {scheme!r} does not fit protocol {protocol}", field=field)
        tls = scheme == "https"
        text = text.rstrip("/")
        if "/" in text:
            raise InputError("give the BMC's host and port, without a path", field=field)
    default = DEFAULT_PORTS[protocol] if tls or protocol == "ipmi" else 80
    host, port = parse_hostport(text, default_port=default, field=field)
    return host, port, tls


def parse_proxy(
    node: str, data: Any, *, source: str | None = None, where: str = "proxy"
) -> ProxySpec:
    """A lab file node's ``proxy:`` mapping; errors name file, line and field."""

    def err(message: str, key: str | None = None) -> InputError:
        field = f"{where}.{key}" if key else where
        return InputError(message, source=source, line=line_of(data, key), field=field, node=node)

    if not isinstance(data, Mapping):
        raise InputError("must be a mapping", source=source, field=where, node=node)
    for key in data:
        if key not in _KEYS:
            raise err(f"unknown key (allowed: {', '.join(sorted(_KEYS))})", key)
    protocol = data.get("protocol")
    if protocol not in DEFAULT_PORTS:
        raise err("must be ipmi or redfish", "protocol")
    stock = data.get("stock")
    upstream = data.get("upstream")
    if stock is not None:
        if STOCK.get(stock) != protocol:
            choices = ", ".join(f"{k} ({v})" for k, v in STOCK.items())
            raise err(f"must be one of {choices}, matching the protocol", "stock")
        if upstream is not None:
            raise err("give either an upstream or a stock emulator, not both", "upstream")
    elif not isinstance(upstream, str) or not upstream:
        raise err("is required (the BMC's host:port), unless 'stock' is given", "upstream")
    for key in ("username", "password", "kg", "domain", "libvirt_uri", "listen"):
        if key in data and not isinstance(data[key], str | int):
            raise err("must be text", key)
    for key in ("domain", "libvirt_uri"):
        if key in data and stock is None:
            raise err("only with 'stock'", key)
    verify = data.get("verify_ca", True)
    if not isinstance(verify, bool | str):
        raise err("must be true, false or the path of a CA bundle", "verify_ca")
    tls = data.get("tls")
    if tls is not None and not isinstance(tls, bool):
        raise err("must be true or false", "tls")
    spec = ProxySpec(
        node=node,
        protocol=protocol,
        username=str(data["username"]) if "username" in data else None,
        password=Secret(str(data.get("password", ""))),
        kg=Secret(str(data.get("kg", ""))),
        verify_ca=verify,
        tls=tls,
        stock=stock,
        domain=str(data["domain"]) if "domain" in data else None,
        libvirt_uri=str(data["libvirt_uri"]) if "libvirt_uri" in data else None,
    )
    if "listen" in data:
        host, port = parse_hostport(str(data["listen"]), default_port=0, field=f"{where}.listen")
        spec = dataclasses.replace(spec, listen_host=host, listen_port=port)
    if upstream is not None:
        try:
            host, port, up_tls = parse_upstream(str(upstream), protocol)
        except InputError as exc:
            raise err(exc.message, "upstream") from None
        spec = spec.with_upstream(host, port, tls=up_tls)
    return spec
