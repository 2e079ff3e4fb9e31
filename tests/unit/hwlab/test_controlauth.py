"""The control API's request checks (bmaas.hwlab.controlauth), header by header:
a loopback Host, no foreign Origin, the lab's token, a JSON body type on writes."""

from __future__ import annotations

import pytest

from bmaas.hwlab.controlauth import Refused, check_request, own_origins, refusal_headers

TOKEN = "s3cret-token-value"
PORT = 40123
OWNER = [
    ("Host", f"127.0.0.1:{PORT}"),
    ("Authorization", f"Bearer {TOKEN}"),
    ("Content-Type", "application/json"),
]


def _check(method: str, headers: list[tuple[str, str]]) -> None:
    check_request(method, headers, token=TOKEN, host="127.0.0.1", port=PORT)


def _replace(name: str, value: str | None) -> list[tuple[str, str]]:
    kept = [(k, v) for k, v in OWNER if k.lower() != name.lower()]
    return kept if value is None else [*kept, (name, value)]


def _refused(method: str, headers: list[tuple[str, str]]) -> Refused:
    with pytest.raises(Refused) as info:
        _check(method, headers)
    message = str(info.value)
    assert TOKEN not in message
    assert "\n" not in message
    return info.value


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", f"127.0.0.1:{PORT}", "localhost", f"localhost:{PORT}", f"LOCALHOST:{PORT}"],
)
def test_the_owner_passes_by_every_loopback_name(method: str, host: str) -> None:
    _check(method, _replace("Host", host))


@pytest.mark.parametrize("origin", [f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}"])
def test_the_servers_own_origin_passes(origin: str) -> None:
    _check("POST", [*OWNER, ("Origin", origin)])
    assert origin in own_origins("127.0.0.1", PORT)


@pytest.mark.parametrize(
    "host",
    [
        None,  # no Host at all
        "evil.example",  # DNS rebinding: a page's own name
        f"evil.example:{PORT}",
        f"127.0.0.1:{PORT + 1}",  # another port
        "127.0.0.1.evil.example",
        "",
        "[::1]",  # not where this server listens
    ],
)
def test_a_foreign_or_missing_host_is_403(host: str | None) -> None:
    refused = _refused("GET", _replace("Host", host))
    assert (refused.status, refused.code) == (403, "forbidden_host")


def test_two_host_headers_are_403() -> None:
    refused = _refused("GET", [*OWNER, ("Host", "evil.example")])
    assert refused.status == 403


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",  # a sandboxed frame or a file:// page
        f"https://127.0.0.1:{PORT}",  # another scheme is another origin
        f"http://127.0.0.1:{PORT + 1}",
        "",
    ],
)
def test_a_foreign_origin_is_403_even_with_the_token(origin: str) -> None:
    refused = _refused("POST", [*OWNER, ("Origin", origin)])
    assert (refused.status, refused.code) == (403, "forbidden_origin")


def test_a_cross_origin_text_plain_post_without_token_is_refused_before_it_is_read() -> None:
    """The browser's "simple request": no preflight, so the server must refuse it."""
    headers = [
        ("Host", "evil.example"),
        ("Origin", "http://evil.example"),
        ("Content-Type", "text/plain"),
    ]
    assert _refused("POST", headers).status == 403
    # even with a loopback Host (a page on another local port), the Origin is refused
    assert _refused("POST", [("Host", f"127.0.0.1:{PORT}"), *headers[1:]]).status == 403


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer wrong",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"Basic {TOKEN}",
        TOKEN,
        "Bearer \u00e9\u00e9",  # non-ASCII: compared as bytes, no TypeError
    ],
)
def test_a_missing_or_wrong_token_is_401(authorization: str | None) -> None:
    refused = _refused("GET", _replace("Authorization", authorization))
    assert (refused.status, refused.code) == (401, "unauthorized")
    assert list(refusal_headers(refused)) == [("WWW-Authenticate", 'Bearer realm="hwlab"')]


def test_the_scheme_is_case_insensitive_and_two_tokens_are_401() -> None:
    _check("GET", _replace("Authorization", f"bearer {TOKEN}"))
    refused = _refused("GET", [*OWNER, ("Authorization", f"Bearer {TOKEN}")])
    assert refused.status == 401


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""],
)
def test_a_write_without_a_json_type_is_415(method: str, content_type: str | None) -> None:
    refused = _refused(method, _replace("Content-Type", content_type))
    assert (refused.status, refused.code) == (415, "unsupported_media_type")
    assert list(refusal_headers(refused)) == []


def test_a_json_type_with_parameters_passes_and_a_read_needs_none() -> None:
    _check("POST", _replace("Content-Type", "Application/JSON; charset=utf-8"))
    _check("GET", _replace("Content-Type", None))


def test_the_checks_go_host_origin_token_type() -> None:
    """A request wrong in every way is refused by the first check: the
    cheapest, and the ones that need no secret, come first."""
    everything_wrong = [("Host", "evil.example"), ("Origin", "http://evil.example")]
    assert _refused("POST", everything_wrong).code == "forbidden_host"
    assert _refused("POST", [OWNER[0], everything_wrong[1]]).code == "forbidden_origin"
    assert _refused("POST", [OWNER[0]]).code == "unauthorized"
    assert _refused("POST", OWNER[:2]).code == "unsupported_media_type"


def test_each_refusal_names_the_class_the_log_counts_it_under() -> None:
    """The server logs refusals by class (bmaas.ratelog), so each has one."""
    assert _refused("GET", [("Host", "evil.example")]).kind == "bad host"
    assert _refused("GET", [OWNER[0], ("Origin", "http://evil.example")]).kind == "cross-origin"
    assert _refused("GET", [OWNER[0]]).kind == "no token"
    assert _refused("GET", [OWNER[0], ("Authorization", "Bearer ")]).kind == "no token"
    assert _refused("GET", [OWNER[0], ("Authorization", "Basic x")]).kind == "no token"
    assert _refused("GET", [OWNER[0], ("Authorization", "Bearer nope")]).kind == "wrong token"
    assert _refused("POST", OWNER[:2]).kind == "not json"
