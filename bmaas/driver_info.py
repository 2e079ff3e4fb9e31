"""``driver_info``: how to reach a node's BMC, in Ironic's vocabulary.

Keys are Ironic's (``ipmi_address``, ``redfish_system_id``, ...) so existing
inventories carry over. Each key is declared once in :data:`FIELDS` with its
converter; :meth:`DriverInfo.parse` checks a raw mapping against the keys the
driver accepts and requires, and names the offending key in every error.
Passwords are :class:`~bmaas.secrets.Secret`, so the repr of a
``DriverInfo`` never shows one.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import urllib.parse
from collections.abc import Callable, Collection, Mapping
from typing import Any

from bmaas import cabundle, sealed, tlspolicy, validate
from bmaas.faults import InputError
from bmaas.secrets import Secret

__all__ = ["DEFAULT_MAX_BODY_BYTES", "FIELDS", "DriverInfo", "InfoField", "MissingKey"]

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _text(value: Any) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
        raise ValueError("must be a non-empty string")
    return str(value)


def _port(value: Any) -> int:
    # a whole number from 1 to 65535: 623.5 is refused, not read as 623
    return validate.port(value)


#: the largest Redfish response body read by default, and the range a node's
#: ``redfish_max_body_bytes`` may set (a BMC's real answers are a few KiB)
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_BODY_RANGE = (64 * 1024, 1024 * 1024 * 1024)


def _body_bytes(value: Any) -> int:
    low, high = MAX_BODY_RANGE
    return validate.whole(validate.digits(value), low=low, high=high, what="a number of bytes")


#: the most requests in flight a node's bmc_max_requests may name (it only
#: lowers the protocol's cap, IPMI 1, Redfish 4: more means nothing)
MAX_BMC_REQUESTS = 1024


def _requests(value: Any) -> int:
    # a number as an inventory writes one: 2.9, " 3 ", "3", True and 10**40
    # are refused (bmc_* keys are bmaas's own: no Ironic text to read)
    return validate.whole(value, low=1, high=MAX_BMC_REQUESTS, what="a whole number")


#: the longest spacing a node's bmc_min_interval may ask for
MAX_MIN_INTERVAL = 3600.0


def _seconds(value: Any) -> float:
    # a number, not text (" 3 " was read as 3)
    return validate.seconds(value, high=MAX_MIN_INTERVAL)


def _secret(value: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str | bytes):
        raise ValueError("must be a string")
    if isinstance(value, str) and sealed.is_sealed(value):
        # a password as the store keeps it (a record's driver_info handed
        # straight to a driver): opened with the store's key, never sent sealed
        try:
            return sealed.keyring().unseal(value)
        except sealed.KeyProblem as exc:  # named by the field: its message alone
            raise ValueError(exc.message) from None
    return Secret(value)


def _bool_or_path(value: Any) -> bool | str:
    """Ironic's ``redfish_verify_ca``: a boolean, or the path of a CA bundle
    (a file of PEM certificates, or a directory of hashed ones:
    :mod:`bmaas.cabundle`)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        if value:
            cabundle.check(value)
            return value
    raise ValueError("must be true, false or the path of a CA bundle")


def _choice(*choices: str) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        text = str(value).lower()
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, not {value!r}")
        return text

    return convert


def _cipher_suite(value: Any) -> int | str:
    """17 or 3, or ``auto`` (17, else 3: a downgrade recorded and reported).
    Never 0 (no authentication): there is no way to ask for it."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    suite = validate.whole(validate.digits(value), what="an IPMI cipher suite number")
    if suite not in (3, 17):
        raise ValueError(f"cipher suite {suite} is not supported (17, 3 or auto)")
    return suite


#: why an address is never shown in its own error: what is wrong with it may
#: be a password typed in the wrong place (``bmc:s3cret``, ``u%3Apw%40bmc``)
_UNSHOWN = "(the value is not shown: it may hold a credential)"


def _host(value: Any) -> str:
    text = _text(value)
    if not validate.is_host(text):
        raise ValueError(f"must be a host name or an IP address {_UNSHOWN}")
    return text


def _url(value: Any) -> str:
    text = _text(value)
    if "://" not in text:
        text = "https://" + text  # Ironic assumes https when the scheme is missing
    scheme, rest = text.split("://", 1)
    if scheme.lower() not in ("http", "https"):
        raise ValueError("scheme must be http or https")
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    # percent-encoded user info (u%3Apw%40bmc) is user info too
    if "@" in netloc or "@" in urllib.parse.unquote(netloc):
        raise ValueError("must not carry credentials; use redfish_username/redfish_password")
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:  # an unclosed IPv6 bracket
        raise ValueError(f"is not a valid URL {_UNSHOWN}") from None
    try:
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"has a port that is not a number from 1 to 65535 {_UNSHOWN}") from None
    if not validate.is_host(parts.hostname or ""):
        raise ValueError(f"must name a host name or an IP address {_UNSHOWN}")
    return text.rstrip("/")


#: where a path given as redfish_system_id must point: the service's own
#: systems collection (Redfish fixes it at /redfish/v1/Systems)
SYSTEMS = "/redfish/v1/Systems/"
#: one path segment (RFC 3986 pchar: unreserved, sub-delims, ':' '@', %XX)
_SEGMENT = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2}){1,255}")


def _system_id(value: Any) -> str:
    """A system id as the BMC names it (``1``, ``System.Embedded.1``, a
    UUID), or its path on the same service (``/redfish/v1/Systems/1``).
    An absolute URL or a ``//host`` path would point the driver at another
    host; ``..`` elsewhere on the service."""
    text = _text(value)
    segment = text.removeprefix(SYSTEMS).removesuffix("/") if text.startswith("/") else text
    if (
        (text.startswith("/") and not text.startswith(SYSTEMS))
        or not _SEGMENT.fullmatch(segment)
        or segment in (".", "..")
    ):
        raise ValueError(
            "must be a system id (such as 1 or System.Embedded.1: one path segment) or its "
            f"path {SYSTEMS}ID on the same service, not a URL or another path {_UNSHOWN}"
        )
    return text


class MissingKey(InputError):
    """A required driver_info key that is absent or null: the one kind of
    problem a caller may tell apart from a bad value (Ironic answers it with
    ``MissingParameterValue``, :mod:`bmaas.drivers.ironic.info`)."""


@dataclasses.dataclass(frozen=True)
class InfoField:
    key: str
    convert: Callable[[Any], Any]
    doc: str


#: every driver_info key bmaas understands, with its converter
FIELDS: dict[str, InfoField] = {
    f.key: f
    for f in (
        InfoField("ipmi_address", _host, "BMC host name or IP address"),
        InfoField("ipmi_port", _port, "UDP port of the BMC (default 623)"),
        InfoField("ipmi_username", _text, "BMC user"),
        InfoField("ipmi_password", _secret, "BMC password"),
        InfoField(
            "ipmi_cipher_suite",
            _cipher_suite,
            "RMCP+ cipher suite: 17 (default), 3, or auto (17, else 3: recorded and reported)",
        ),
        InfoField(
            "ipmi_priv_level",
            _choice("administrator", "operator", "user"),
            "privilege level to request (default administrator)",
        ),
        InfoField("redfish_address", _url, "Redfish service root, scheme://host[:port]"),
        InfoField(
            "redfish_system_id",
            _system_id,
            "the system's id (1, System.Embedded.1) or its path /redfish/v1/Systems/ID",
        ),
        InfoField("redfish_username", _text, "Redfish user"),
        InfoField("redfish_password", _secret, "Redfish password"),
        InfoField(
            "redfish_tls_min_version",
            tlspolicy.parse_min_version,
            "lowest TLS version: 1.2 (default, or BMAAS_REDFISH_TLS_MIN_VERSION) or 1.3",
        ),
        InfoField(
            "redfish_tls_ciphers",
            tlspolicy.parse_ciphers,
            "OpenSSL cipher list for TLS 1.2 (default OpenSSL's, or BMAAS_REDFISH_TLS_CIPHERS)",
        ),
        InfoField(
            "redfish_verify_ca", _bool_or_path, "verify TLS: true, false or a CA bundle path"
        ),
        InfoField(
            "redfish_auth_type",
            _choice("basic", "session", "auto"),
            "basic, session or auto (default auto)",
        ),
        InfoField(
            "redfish_max_body_bytes",
            _body_bytes,
            "largest response body read, in bytes (default 16 MiB; 64 KiB to 1 GiB)",
        ),
        InfoField(
            "boot_mode",
            _choice("uefi", "bios"),
            "firmware boot mode to ask for with every boot override: uefi or bios "
            "(Ironic's boot_mode; Redfish BootSourceOverrideMode UEFI or Legacy)",
        ),
        InfoField(
            "deploy_boot_device",
            _choice("pxe", "cdrom"),
            "what a deploy boots where the node has no virtual media: pxe (default) or "
            "cdrom (a one-time override to the CD drive; the disc is put there outside "
            "bmaas, as the VM lab does: IPMI has no virtual media)",
        ),
        InfoField("fake_machine", _text, "name of a simulated machine (fake driver)"),
        InfoField(
            "bmc_max_requests",
            _requests,
            "requests in flight to this BMC at once (lowers the protocol's default): "
            f"a whole number from 1 to {MAX_BMC_REQUESTS}",
        ),
        InfoField(
            "bmc_min_interval",
            _seconds,
            "seconds between request starts on this BMC (widens the protocol's default): "
            f"a number from 0 to {MAX_MIN_INTERVAL:g}",
        ),
    )
}


@dataclasses.dataclass(frozen=True)
class DriverInfo:
    """Parsed, typed driver_info. Missing keys are ``None`` (or the default)."""

    ipmi_address: str | None = None
    ipmi_port: int = 623
    ipmi_username: str | None = None
    ipmi_password: Secret = dataclasses.field(default_factory=Secret)
    ipmi_cipher_suite: int | str | None = None
    ipmi_priv_level: str = "administrator"
    redfish_address: str | None = None
    redfish_system_id: str | None = None
    redfish_username: str | None = None
    redfish_password: Secret = dataclasses.field(default_factory=Secret)
    redfish_verify_ca: bool | str = True
    #: None: the process's (``BMAAS_REDFISH_TLS_*``) or the default (:mod:`bmaas.tlspolicy`)
    redfish_tls_min_version: str | None = None
    redfish_tls_ciphers: str | None = None
    redfish_auth_type: str = "auto"
    redfish_max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    boot_mode: str | None = None
    #: None: PXE (see FIELDS)
    deploy_boot_device: str | None = None
    fake_machine: str | None = None
    bmc_max_requests: int | None = None
    bmc_min_interval: float | None = None

    @classmethod
    def parse(
        cls,
        raw: Any,
        *,
        required: Collection[str] = (),
        accepted: Collection[str] | None = None,
        node: str | None = None,
    ) -> DriverInfo:
        """Validate ``raw`` and build a ``DriverInfo``.

        ``accepted`` (default: every known key) limits which keys may appear;
        ``required`` lists the keys that must. Errors are ``InputError`` with
        ``field`` set to ``driver_info.<key>``.
        """
        values, problems = cls._convert(raw, required=required, accepted=accepted, node=node)
        if problems:
            raise problems[0]
        return cls(**values)

    @classmethod
    def problems(
        cls,
        raw: Any,
        *,
        required: Collection[str] = (),
        accepted: Collection[str] | None = None,
        node: str | None = None,
    ) -> list[InputError]:
        """Every problem :meth:`parse` would raise the first of, for
        validation that reports everything in one pass."""
        return cls._convert(raw, required=required, accepted=accepted, node=node)[1]

    @staticmethod
    def _convert(
        raw: Any,
        *,
        required: Collection[str],
        accepted: Collection[str] | None,
        node: str | None,
    ) -> tuple[dict[str, Any], list[InputError]]:
        allowed = set(FIELDS) if accepted is None else set(accepted)
        values: dict[str, Any] = {}
        problems: list[InputError] = []
        if not isinstance(raw, Mapping):
            kind = "null" if raw is None else f"a {type(raw).__name__}"
            problems.append(
                InputError(f"must be a mapping, not {kind}", field="driver_info", node=node)
            )
            return values, problems
        hinted: set[str] = set()  # a typo of a required key says so once, not twice
        for key, value in raw.items():
            if not isinstance(key, str):
                shown = f"{key!r}"[:40]
                problems.append(
                    InputError(
                        f"unknown key {shown} (keys are text)", field="driver_info", node=node
                    )
                )
                continue
            field = f"driver_info.{key}"
            if key not in allowed:
                hint = difflib.get_close_matches(key, sorted(allowed), n=1)
                extra = f"; did you mean {hint[0]!r}?" if hint else ""
                hinted.update(hint)
                problems.append(InputError(f"unknown key{extra}", field=field, node=node))
                continue
            if value is None:
                continue  # unset: the default, or "is required" below
            try:
                values[key] = FIELDS[key].convert(value)
            except ValueError as exc:
                problems.append(InputError(str(exc), field=field, node=node))
        for key in required:
            if key in values or key in hinted or raw.get(key) is not None:
                continue
            try:
                validate.present(raw.get(key))
            except ValueError as exc:
                message = str(exc) if key in raw else "is required"
                problems.append(MissingKey(message, field=f"driver_info.{key}", node=node))
        return values, problems

    def to_dict(self, *, reveal: bool = False) -> dict[str, Any]:
        """The keys that were set, passwords masked unless ``reveal``."""
        out: dict[str, Any] = {}
        defaults = DriverInfo()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name):
                continue
            if isinstance(value, Secret):
                value = value.reveal() if reveal else str(value)
            out[f.name] = value
        return out
