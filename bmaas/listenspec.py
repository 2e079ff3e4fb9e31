"""What a push listener is told: where it listens, the URL BMCs post to, its certificate.

``bmaas sync --events-listen`` (and an Ironic conductor's ``[bmaas]events_listen``)
take these from people. Each is checked here, once, before anything starts,
and the listener itself is built from the same functions (one way):

* :func:`host_port`: ``HOST:PORT`` (``[::1]:9121`` for IPv6), the port ASCII
  digits from 0 to 65535 (``str.isdigit()`` takes ``"²"``, on which ``int()``
  raises; :func:`bmaas.validate.digits` takes neither);
* :func:`destination`: an ``http://`` or ``https://`` URL with a host and a
  valid port, no user name or password (the URL is written into every
  subscription on every BMC), no white space or control characters (a CR-LF
  is a header injection where the URL is sent);
* :func:`server_context`: the certificate and key, each a regular file of at
  most :data:`MAX_PEM_BYTES` (:func:`bmaas.files.read_limited`: a FIFO or
  ``/dev/zero`` is refused, not read for ever), loaded into a TLS server
  context; a key that does not match the certificate, or an encrypted key
  (no passphrase is asked: a service has no terminal), is refused here, not
  at the first BMC's handshake;
* :func:`listening_socket`: the socket, bound and listening; a bind error
  names the address in one line.

Every function raises ``ValueError`` with a message that reads after the
option's name (:mod:`bmaas.validate`'s convention); the caller adds the name.
"""

from __future__ import annotations

import socket
import ssl
import urllib.parse

from bmaas import validate
from bmaas.files import read_limited

__all__ = [
    "MAX_PEM_BYTES",
    "destination",
    "host_port",
    "listening_socket",
    "server_context",
    "where",
]

#: the largest certificate chain or key file read (a chain of a few
#: certificates is a few KiB)
MAX_PEM_BYTES = 1024 * 1024
#: connections the kernel queues before the listener accepts them
BACKLOG = 128
_CONTROL = frozenset(chr(c) for c in range(0x21)) | {"\x7f"}


def where(host: str, port: int) -> str:
    """``host:port`` as it is written (``[::1]:9121`` for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port)."""
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = validate.digits(port_text)  # ASCII digits only, or left as text
    if (
        not sep
        or not host
        or any(c in _CONTROL for c in host)
        or not isinstance(port, int)
        or port > 65535
    ):
        raise ValueError(f"must be HOST:PORT with a port from 0 to 65535, not {text!r}")
    return host, port


def destination(url: str) -> str:
    """An ``http(s)://`` URL fit to be a subscription's ``Destination``."""
    if any(c in _CONTROL for c in url) or not url.isascii():
        raise ValueError(f"must be an http:// or https:// URL without spaces, not {url!r}")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError when it is not a port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry a user name or password (every BMC is told the URL)")
    if port == 0:
        raise ValueError(f"must not have port 0, not {url!r}")
    return url


def _no_passphrase() -> bytes:
    # an encrypted key would otherwise make OpenSSL ask on the terminal
    return b""


def server_context(certfile: str, keyfile: str | None) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 at least) with the certificate chain."""
    for path in (certfile, keyfile):
        if path is not None:
            try:
                read_limited(path, limit=MAX_PEM_BYTES)
            except OSError as exc:
                raise ValueError(f"{path!r} {exc.strerror or exc}") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile, keyfile, password=_no_passphrase)
    except ssl.SSLError as exc:
        raise ValueError(_pem_problem(exc)) from None
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or exc}") from None
    return context


def _pem_problem(exc: ssl.SSLError) -> str:
    reason = exc.reason or ""
    if reason == "KEY_VALUES_MISMATCH":
        return "the key does not match the certificate"
    if reason in ("BAD_DECRYPT", "BAD_PASSWORD_READ", "PROBLEMS_GETTING_PASSWORD"):
        return "the key is encrypted (give an unencrypted key; no passphrase is asked)"
    return f"is not a PEM certificate with its key (OpenSSL: {reason or 'refused'})"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) and listening."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
        except BaseException:
            sock.close()
            raise
    except OSError as exc:  # socket.gaierror included
        raise ValueError(f"cannot listen on {where(host, port)}: {exc.strerror or exc}") from None
    return sock
