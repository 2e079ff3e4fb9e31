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
from typing import Any

from bmaas import fields, validate
from bmaas.faults import InputError
from bmaas.secrets import Secret

__all__ = ["STOCK", "ProxySpec", "parse_hostport", "parse_proxy"]

#: stock emulators hwlab can start behind a proxy, per protocol
STOCK = {"vbmc": "ipmi", "sushy": "redfish"}
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


_text = fields.kind_of(str, int, bool, what="text")
_TEXT = fields.Field(_text)


def _listen(value: Any) -> tuple[str, int]:
    return parse_hostport(str(_text(value)), default_port=0, field="listen")


def _stock(found: fields.Found) -> None:
    stock, upstream = found.data.get("stock"), found.data.get("upstream")
    if stock is not None:
        if found.ok("protocol") and STOCK.get(stock) != found.values["protocol"]:
            choices = ", ".join(f"{k} ({v})" for k, v in STOCK.items())
            found.fail(f"must be one of {choices}, matching the protocol", "stock")
        if upstream is not None:
            found.fail("give either an upstream or a stock emulator, not both", "upstream")
        return
    if not isinstance(upstream, str) or not upstream:
        found.fail("is required (the BMC's host:port), unless 'stock' is given", "upstream")
    elif found.ok("protocol"):
        try:
            found.values["upstream"] = parse_upstream(upstream, found.values["protocol"])
        except InputError as exc:
            found.fail(exc.message, "upstream")
    for key in ("domain", "libvirt_uri"):
        if key in found.data:
            found.fail("only with 'stock'", key)


#: a lab file node's ``proxy:`` mapping
RECORD = fields.Record(
    {
        "protocol": fields.one_of(
            *DEFAULT_PORTS,
            required=True,
            missing="must be ipmi or redfish",
            message="must be ipmi or redfish",
        ),
        "stock": fields.Field(),
        "upstream": fields.Field(),
        **dict.fromkeys(("username", "password", "kg", "domain", "libvirt_uri"), _TEXT),
        "verify_ca": fields.Field(
            fields.kind_of(bool, str, what="true, false or the path of a CA bundle"),
            default=True,
        ),
        "tls": fields.Field(fields.optional(fields.kind_of(bool, what="true or false"))),
        "listen": fields.Field(_listen),
    },
    checks=(_stock,),
    unknown="unknown key (allowed: {allowed})",
)


def parse_proxy(
    node: str, data: Any, *, source: str | None = None, where: str = "proxy"
) -> ProxySpec:
    """A lab file node's ``proxy:`` mapping; every problem at once
    (:class:`bmaas.fields.Problems`), each naming file, line and field."""
    check = fields.Checker(source)
    values = RECORD.walk(data, check, where, None, node)
    check.raise_if_any()
    assert values is not None
    spec = ProxySpec(
        node=node,
        protocol=values["protocol"],
        username=str(values["username"]) if "username" in values else None,
        password=Secret(str(values.get("password", ""))),
        kg=Secret(str(values.get("kg", ""))),
        verify_ca=values["verify_ca"],
        tls=values.get("tls"),
        stock=values.get("stock"),
        domain=str(values["domain"]) if "domain" in values else None,
        libvirt_uri=str(values["libvirt_uri"]) if "libvirt_uri" in values else None,
    )
    if "listen" in values:
        spec = dataclasses.replace(
            spec, listen_host=values["listen"][0], listen_port=values["listen"][1]
        )
    if values.get("upstream") is not None:
        host, port, up_tls = values["upstream"]
        spec = spec.with_upstream(host, port, tls=up_tls)
    return spec
