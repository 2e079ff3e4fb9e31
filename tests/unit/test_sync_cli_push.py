"""``bmaas sync``'s push listener options: every problem at once, one
``error:`` line each, exit 2, no traceback, before anything starts (issue 46,
finding 6); good ones make PushSettings."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from bmaas.cli import App, cli
from bmaas.cli.sync import _push_settings
from bmaas.cliutil import InputProblems
from bmaas.events import PushSettings
from bmaas.hwlab.tls import LabCertificate, make_certificate


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[LabCertificate, LabCertificate]:
    """Two certificates (the second's key does not match the first)."""
    base = tmp_path_factory.mktemp("certs")
    (base / "a").mkdir()
    (base / "b").mkdir()
    return make_certificate(base / "a"), make_certificate(base / "b")


def test_good_settings(certs: tuple[LabCertificate, LabCertificate]) -> None:
    cert = certs[0]
    assert _push_settings("127.0.0.1:0", None, None, None, False) == PushSettings("127.0.0.1", 0)
    url = "https://bmaas.mgmt:9121/bmaas/events"
    good = _push_settings("[::1]:0", url, str(cert.cert_path), str(cert.key_path), True)
    assert good == PushSettings("::1", 0, url, str(cert.cert_path), str(cert.key_path), True)
    assert _push_settings(None, None, None, None, False) is None


def test_every_problem_at_once() -> None:
    with pytest.raises(InputProblems) as caught:
        _push_settings("bmaas.mgmt", "ftp://x", None, "k", False, following=False)
    lines = [str(p) for p in caught.value.problems]
    assert lines == [
        "--events-listen: needs --interval, events on (nothing else takes pushed events)",
        "--events-listen: must be HOST:PORT with a port from 0 to 65535, not 'bmaas.mgmt'",
        "--events-listen-url: must be an http:// or https:// URL with a host, not 'ftp://x'",
        "--events-tls-key: needs --events-tls-cert",
    ]


#: ``bmaas sync ARGS`` on a fresh database: (exit code, output lines)
Run = Callable[..., tuple[int, list[str]]]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    def invoke(*args: str) -> tuple[int, list[str]]:
        app = App(db=str(tmp_path / "b.db"))
        result = CliRunner().invoke(cli, ["sync", *args], obj=app)
        assert "Traceback" not in result.output
        assert not (tmp_path / "b.db").exists()  # refused before the store opened
        return result.exit_code, result.output.strip().splitlines()

    return invoke


LOOP = ("--interval", "1", "--count", "1")


def test_options_without_a_listener_are_refused(run: Run) -> None:
    code, lines = run(*LOOP, "--events-prefer-push")
    assert (code, lines) == (2, ["error: --events-prefer-push need --events-listen HOST:PORT"])


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--events-listen", "127.0.0.1:\u00b2"),  # int() raised ValueError: a traceback
            "error: --events-listen: must be HOST:PORT with a port from 0 to 65535, "
            "not '127.0.0.1:\u00b2'",
        ),
        (
            ("--events-listen", "127.0.0.1:0", "--events-listen-url", "http://u:pw@bmaas:1/e"),
            "error: --events-listen-url: must not carry a user name or password "
            "(every BMC is told the URL)",
        ),
        (
            ("--events-listen", "127.0.0.1:0", "--events-listen-url", "http://bmaas/e\r\nX: y"),
            "error: --events-listen-url: must be an http:// or https:// URL without spaces, "
            "not 'http://bmaas/e\\r\\nX: y'",
        ),
        (
            ("--events-listen", "192.0.2.1:0"),  # TEST-NET-1: not an address of this host
            "error: --events-listen: cannot listen on 192.0.2.1:0: Cannot assign requested address",
        ),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(run: Run, args: tuple[str, ...], line: str) -> None:
    code, lines = run(*LOOP, *args)
    assert (code, lines) == (2, [line])


def test_a_listener_without_a_loop_is_refused(run: Run) -> None:
    code, lines = run("--events-listen", "127.0.0.1:0")
    assert code == 2
    assert lines == [
        "error: --events-listen: needs --interval, events on (nothing else takes pushed events)"
    ]
    code, lines = run(*LOOP, "--no-events", "--events-listen", "127.0.0.1:0")
    assert code == 2


def test_a_port_in_use_is_named(run: Run) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, lines = run(*LOOP, "--events-listen", f"127.0.0.1:{port}")
    assert (code, lines) == (
        2,
        [f"error: --events-listen: cannot listen on 127.0.0.1:{port}: Address already in use"],
    )


def test_a_certificate_that_is_no_file_is_refused_without_reading_it(
    run: Run,
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "cert.fifo"
    os.mkfifo(fifo)  # open() would wait for a writer for ever
    for path in (str(fifo), "/dev/zero"):
        code, lines = run(*LOOP, "--events-listen", "127.0.0.1:0", "--events-tls-cert", path)
        assert code == 2
        assert len(lines) == 1
        assert lines[0].startswith("error: Invalid value for '--events-tls-cert'")
        assert "is not a regular file" in lines[0]


def test_a_key_that_does_not_match_is_refused(
    run: Run,
    certs: tuple[LabCertificate, LabCertificate],
    tmp_path: Path,
) -> None:
    ours, other = certs
    args = ("--events-listen", "127.0.0.1:0", "--events-tls-cert", str(ours.cert_path))
    code, lines = run(*LOOP, *args, "--events-tls-key", str(other.key_path))
    assert (code, lines) == (
        2,
        ["error: --events-tls-cert/--events-tls-key: the key does not match the certificate"],
    )
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    code, lines = run(*LOOP, "--events-listen", "127.0.0.1:0", "--events-tls-cert", str(junk))
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith("error: --events-tls-cert: is not a PEM certificate")
