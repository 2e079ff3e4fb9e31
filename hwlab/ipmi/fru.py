"""A FRU inventory image (Platform Management FRU Information Storage
Definition v1.0) for a simulated machine: chassis, board and product areas.

Real clients read it with Get FRU Inventory Area Info / Read FRU Data
(``ipmitool fru print``, pyghmi's ``fru.FRU``); the lab serves it from FRU 0.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["build_fru"]

_END_OF_FIELDS = 0xC1
_RACK_MOUNT_CHASSIS = 0x17
_TEXT = 0xC0  # type/length byte: 8-bit ASCII + Latin-1, length in the low 6 bits


def _checksum(data: bytes) -> int:
    """Zero checksum: the byte that makes the area sum to 0 modulo 256."""
    return -sum(data) & 0xFF


def _field(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")[:63]
    return bytes([_TEXT | len(raw)]) + raw


def _area(head: bytes, fields: Iterable[str]) -> bytes:
    """One area: version, length (8-byte units), head, typed fields, end
    marker, padding to a multiple of 8 and the checksum."""
    body = bytes([1, 0]) + head + b"".join(_field(f) for f in fields) + bytes([_END_OF_FIELDS])
    units = (len(body) + 1 + 7) // 8
    body = body + bytes(units * 8 - len(body) - 1)
    body = body[:1] + bytes([units]) + body[2:]
    return body + bytes([_checksum(body)])


def build_fru(*, manufacturer: str, model: str, serial: str, version: str = "1") -> bytes:
    """The FRU 0 image: common header, then chassis, board and product areas."""
    chassis = _area(bytes([_RACK_MOUNT_CHASSIS]), [f"{model}-CH", serial])
    # board: language 0 (English), manufacture date 0 ("unspecified")
    board = _area(bytes([0, 0, 0, 0]), [manufacturer, f"{model} board", serial, "", ""])
    product = _area(bytes([0]), [manufacturer, model, model, version, serial, "", ""])
    offsets = []
    position = 8
    for area in (chassis, board, product):
        offsets.append(position // 8)
        position += len(area)
    header = bytes([1, 0, offsets[0], offsets[1], offsets[2], 0, 0])
    return header + bytes([_checksum(header)]) + chassis + board + product
