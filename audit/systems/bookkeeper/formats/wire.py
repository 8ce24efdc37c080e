"""Just enough of the protobuf wire format to walk top-level fields without a schema.

Used to redact a field in place (keeping unknown fields and field order byte-identical) and to
read the varint32 length prefix of BookKeeper's delimited v3 metadata."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from audit.errors import PayloadError

VARINT, FIXED64, LENGTH_DELIMITED, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5


def read_varint(data: bytes, pos: int, source: str, field: str, max_bytes: int = 10) -> tuple[int, int]:
    """Unsigned varint at `pos` -> (value, next position)."""
    value = shift = 0
    for i in range(max_bytes):
        if pos + i >= len(data):
            raise PayloadError(source, field, "a complete varint", f"end of data at byte {pos + i}")
        b = data[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos + i + 1
        shift += 7
    raise PayloadError(source, field, f"a varint of at most {max_bytes} bytes", data[pos:pos + max_bytes])


def encode_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"varint must be non-negative, got {value}")
    out = bytearray()
    while True:
        if value < 0x80:
            out.append(value)
            return bytes(out)
        out.append((value & 0x7F) | 0x80)
        value >>= 7


@dataclass(frozen=True)
class WireField:
    number: int
    wire_type: int
    start: int          # offset of the tag
    tag_end: int        # offset after the tag
    value_start: int    # offset of the value (after the length prefix for LENGTH_DELIMITED)
    end: int            # offset after the field


def iter_fields(data: bytes, source: str, field: str = "message") -> Iterator[WireField]:
    """Top-level fields of one serialized message (groups are skipped as a whole)."""
    pos = 0
    while pos < len(data):
        start = pos
        tag, pos = read_varint(data, pos, source, field)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise PayloadError(source, field, "a field number > 0", f"tag {tag} at byte {start}")
        tag_end = pos
        if wire_type == START_GROUP:
            value_start, pos = pos, _skip_group(data, pos, number, source, field)
        else:
            skipped = _skip_value(data, pos, wire_type, source, field)
            if skipped is None:
                raise PayloadError(source, field, "wire type 0, 1, 2, 3 or 5", f"wire type {wire_type} at byte {start}")
            value_start, pos = skipped
        if pos > len(data):
            raise PayloadError(source, field, f"{pos - start} bytes for field {number}",
                               f"{len(data) - start} bytes (truncated)")
        yield WireField(number, wire_type, start, tag_end, value_start, pos)


def _skip_value(data: bytes, pos: int, wire_type: int, source: str, field: str) -> tuple[int, int] | None:
    """The value of a non-group field at `pos` -> (value start after any length prefix, end), or None
    for a wire type that is not VARINT, FIXED64, FIXED32 or LENGTH_DELIMITED. The end may lie past the data."""
    if wire_type == VARINT:
        return pos, read_varint(data, pos, source, field)[1]
    if wire_type == FIXED64:
        return pos, pos + 8
    if wire_type == FIXED32:
        return pos, pos + 4
    if wire_type == LENGTH_DELIMITED:
        size, value_start = read_varint(data, pos, source, field)
        return value_start, value_start + size
    return None


def _skip_group(data: bytes, pos: int, number: int, source: str, field: str) -> int:
    depth = 1
    while depth:
        tag, pos = read_varint(data, pos, source, field)
        wire_type = tag & 7
        if wire_type == START_GROUP:
            depth += 1
        elif wire_type == END_GROUP:
            depth -= 1
        else:
            skipped = _skip_value(data, pos, wire_type, source, field)
            if skipped is None:
                raise PayloadError(source, field, "a valid wire type inside group", wire_type)
            pos = skipped[1]
        if pos > len(data):
            raise PayloadError(source, field, f"end of group {number}", "end of data (truncated)")
    return pos
