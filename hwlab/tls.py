"""hwlab's one TLS helper: a throwaway CA and server certificate, and the
SSL contexts the lab's servers and proxies use.

Clients verify the lab's BMCs (emulated or proxied) the way they should
verify real ones: against a CA bundle (``redfish_verify_ca: <ca.pem>``), not
with verification turned off. The CA signs one certificate for ``127.0.0.1``,
``::1``, ``localhost`` and any host a proxy listens on.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import pathlib
import ssl
from collections.abc import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bmaas.hwlab.statefiles import write_private

__all__ = [
    "LabCertificate",
    "ensure_certificate",
    "make_certificate",
    "server_context",
    "upstream_context",
]

#: long enough for any lab run, short enough that a leaked file is soon worthless
VALIDITY = datetime.timedelta(days=7)


@dataclasses.dataclass(frozen=True)
class LabCertificate:
    ca_path: pathlib.Path
    cert_path: pathlib.Path
    key_path: pathlib.Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hwlab"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def make_certificate(directory: pathlib.Path, hosts: Iterable[str] = ()) -> LabCertificate:
    """Write ``ca.pem``, ``server.pem`` and ``server.key`` (mode 0600) into
    ``directory``; the server certificate names loopback and ``hosts``."""
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + VALIDITY

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("hwlab lab CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    names = [_san(h) for h in dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts])]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("hwlab BMC"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = LabCertificate(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    # 0600 and never through a link, like every file in a state directory
    write_private(out.ca_path, ca.public_bytes(serialization.Encoding.PEM).decode("ascii"))
    write_private(out.cert_path, cert.public_bytes(serialization.Encoding.PEM).decode("ascii"))
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_private(out.key_path, pem.decode("ascii"))
    return out


def ensure_certificate(directory: str | os.PathLike[str], host: str) -> LabCertificate:
    """The certificate in ``directory``, made once for ``host`` and reused."""
    folder = pathlib.Path(directory)
    found = LabCertificate(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    if all(p.exists() for p in (found.ca_path, found.cert_path, found.key_path)):
        return found
    return make_certificate(folder, [host])


def server_context(cert: LabCertificate) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert.cert_path, cert.key_path)
    return context


def upstream_context(verify: bool | str) -> ssl.SSLContext:
    """How a proxy checks the real BMC: the system CAs (True), a CA
    bundle (a path), or not at all (False; BMCs with factory certificates)."""
    if verify is False:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
