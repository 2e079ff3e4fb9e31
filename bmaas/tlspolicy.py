"""The TLS bmaas speaks to a Redfish BMC: a minimum version and, optionally,
the ciphers, per node or for the whole process.

The settings (``redfish_tls_min_version``, ``redfish_tls_ciphers``, their
``BMAAS_REDFISH_TLS_*`` variables; a node's value wins): docs/operator.md,
"BMC security". Why here and not sushy's ``tls_min_version``/``tls_ciphers``:
those are new in sushy 5.14 and bmaas supports 5.10, and sushy's session is
not the only way bmaas reaches a BMC (one :class:`ssl.SSLContext` per policy
and CA setting serves sushy's adapter and the lean read's sockets). There is
no way to ask for TLS 1.0 or 1.1 (RFC 8996).

A refused handshake or a certificate that does not verify is the node's
configuration, not its hardware: :func:`handshake_problem` maps it to an
:class:`~bmaas.faults.InputError` naming the setting to change.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import os
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from bmaas.faults import InputError

__all__ = [
    "DEFAULT_MIN_VERSION",
    "ENV_CIPHERS",
    "ENV_MIN_VERSION",
    "VERSIONS",
    "TLSPolicy",
    "environment_problems",
    "handshake_problem",
    "is_loopback",
    "parse_ciphers",
    "parse_min_version",
    "transport_warning",
]

#: the versions a node may ask for as its minimum
VERSIONS: dict[str, ssl.TLSVersion] = {
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}
DEFAULT_MIN_VERSION = "1.2"
ENV_MIN_VERSION = "BMAAS_REDFISH_TLS_MIN_VERSION"
ENV_CIPHERS = "BMAAS_REDFISH_TLS_CIPHERS"


def parse_min_version(value: Any) -> str:
    text = str(value).strip()
    if text.lower().startswith("tlsv"):
        text = text[4:]
    if text not in VERSIONS:
        raise ValueError(
            f"TLS version {value!r} is not one bmaas speaks: 1.2 or 1.3 "
            "(1.0 and 1.1 are never used)"
        )
    return text


def parse_ciphers(value: Any) -> str:
    """An OpenSSL cipher list this Python's OpenSSL accepts (it refuses one
    that names no cipher it knows)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be an OpenSSL cipher list, e.g. ECDHE+AESGCM")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(value.strip())
    except ssl.SSLError:
        raise ValueError(f"no cipher this OpenSSL knows matches {value.strip()!r}") from None
    return value.strip()


@dataclasses.dataclass(frozen=True)
class TLSPolicy:
    """What a TLS handshake with a BMC must meet."""

    min_version: str = DEFAULT_MIN_VERSION
    #: an OpenSSL cipher list (TLS 1.2); None: OpenSSL's defaults
    ciphers: str | None = None

    @classmethod
    def of(
        cls,
        *,
        min_version: str | None = None,
        ciphers: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> TLSPolicy:
        """A node's settings over the process's (``BMAAS_REDFISH_TLS_*``)
        over the default. A bad environment value is an ``InputError``."""
        env = os.environ if environ is None else environ
        problems = environment_problems(env)
        if problems:
            raise problems[0]
        return cls(
            min_version=min_version
            or (parse_min_version(env[ENV_MIN_VERSION]) if env.get(ENV_MIN_VERSION) else None)
            or DEFAULT_MIN_VERSION,
            ciphers=ciphers or (parse_ciphers(env[ENV_CIPHERS]) if env.get(ENV_CIPHERS) else None),
        )

    def describe(self) -> str:
        return f"TLS >= {self.min_version}" + (f", ciphers {self.ciphers}" if self.ciphers else "")

    def apply(self, context: ssl.SSLContext) -> ssl.SSLContext:
        context.minimum_version = VERSIONS[self.min_version]
        if self.ciphers:
            context.set_ciphers(self.ciphers)
        return context


def environment_problems(environ: Mapping[str, str] | None = None) -> list[InputError]:
    """Every bad ``BMAAS_REDFISH_TLS_*`` value, one problem each (checked
    before any work: exit 2 up front, not a line per node)."""
    env = os.environ if environ is None else environ
    problems = []
    for name, parse in ((ENV_MIN_VERSION, parse_min_version), (ENV_CIPHERS, parse_ciphers)):
        if env.get(name):
            try:
                parse(env[name])
            except ValueError as exc:
                problems.append(InputError(f"{name}: {exc}", source="environment"))
    return problems


@functools.lru_cache(maxsize=64)
def client_context(verify: bool | str, policy: TLSPolicy) -> ssl.SSLContext:
    """One client context per CA setting and policy for the process (loading
    certifi's ~150 certificates per connection would cost a fleet dearly; a
    context is safe to share between threads). ``verify``: requests'
    meaning (True: certifi's bundle, a path: that CA file or directory,
    False: no check)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        from requests.utils import DEFAULT_CA_BUNDLE_PATH

        where = DEFAULT_CA_BUNDLE_PATH if verify is True else str(verify)
        if os.path.isdir(where):
            context.load_verify_locations(capath=where)
        else:
            context.load_verify_locations(cafile=where)
        context.check_hostname = True
        context.verify_mode = ssl.CERT_REQUIRED
    return policy.apply(context)


#: OpenSSL reasons of a handshake that found no version both sides speak
_VERSION_REASONS = frozenset(
    {
        "UNSUPPORTED_PROTOCOL",
        "TLSV1_ALERT_PROTOCOL_VERSION",
        "NO_PROTOCOLS_AVAILABLE",
        "WRONG_SSL_VERSION",
        "VERSION_TOO_LOW",
    }
)
#: ... and of one that found no cipher both sides accept
_CIPHER_REASONS = frozenset(
    {"SSLV3_ALERT_HANDSHAKE_FAILURE", "NO_SHARED_CIPHER", "NO_CIPHERS_AVAILABLE"}
)


def handshake_problem(chain: Iterable[BaseException], *, node: str | None) -> InputError | None:
    """The configuration problem a failed TLS handshake shows, if it is one:
    a certificate that does not verify (``redfish_verify_ca``), no common
    version (``redfish_tls_min_version``) or cipher (``redfish_tls_ciphers``).
    ``chain``: the exception and every exception inside it. Any other TLS
    failure (a reset, an EOF mid-handshake) is left to the transport's
    mapping (``BMCUnreachable``)."""
    for exc in chain:
        if isinstance(exc, ssl.SSLCertVerificationError):
            why = getattr(exc, "verify_message", None) or "verification failed"
            return InputError(
                f"the BMC's TLS certificate does not verify ({why}): give the CA that "
                "signed it as redfish_verify_ca (a CA bundle path)",
                field="driver_info.redfish_verify_ca",
                node=node,
            )
        if isinstance(exc, ssl.SSLError):
            reason = getattr(exc, "reason", None) or ""
            if reason in _VERSION_REASONS:
                return InputError(
                    f"the BMC offers no TLS version bmaas accepts (OpenSSL: {reason}): it "
                    "speaks only TLS 1.0/1.1, or less than redfish_tls_min_version asks; "
                    "update its firmware, or put a TLS proxy in front of it",
                    field="driver_info.redfish_tls_min_version",
                    node=node,
                )
            if reason in _CIPHER_REASONS:
                return InputError(
                    f"the BMC and bmaas share no TLS cipher (OpenSSL: {reason}): check "
                    "redfish_tls_ciphers (and BMAAS_REDFISH_TLS_CIPHERS) against the BMC's",
                    field="driver_info.redfish_tls_ciphers",
                    node=node,
                )
    return None


def transport_warning(address: str, verify: bool | str) -> str | None:
    """What an operator must know about how bmaas reaches the BMC at
    ``address``, or ``None``: a plain-HTTP address crosses the network with no
    TLS at all (bmaas logs in with the password in the body of the session
    POST, or in every request's Basic ``Authorization`` header, and then sends
    the session token in every request: anyone on the path reads them); an
    HTTPS one with verification off can be impersonated. Plain HTTP to the
    loopback address (hwlab's BMCs, a local proxy) crosses no network: no
    warning. ``redfish_verify_ca`` means nothing over plain HTTP, so it is
    not what the warning speaks of there."""
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    if parts.scheme == "http":
        if is_loopback(parts.hostname):
            return None
        return (
            f"{address} is plain HTTP: no TLS at all, so the BMC password (in the login, "
            "or in every request with Basic auth) and the session token cross the network "
            "readable by anyone on the path; use https://"
        )
    if verify is False:
        return (
            f"TLS certificate verification is off for {address} (redfish_verify_ca=false): "
            "anyone on the path can impersonate this BMC and read the password"
        )
    return None


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a URL's hostname) is this machine: plain HTTP to it
    crosses no wire, so it earns no transport warning."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
