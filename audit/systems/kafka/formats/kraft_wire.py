"""The Kafka message wire format for flexible versions, driven by transcribed schemas (kraft_records.py).

Read and written as Kafka's generated message readers and writers do (docs/formats/kafka.md §6.2).
Integers big-endian; uuid 16 bytes; strings, bytes and arrays as `uvarint (length + 1)` then the items, 0 meaning
null (refused where the field is not nullable in that version); every struct ends with a tagged-field section
`uvarint count, then (tag uvarint, size uvarint, value)`. A field outside its versions is neither read nor
written; a tagged field is written only when it differs from its default, so an absent tag reads as the default.
Uuids are rendered like Uuid.toString (URL-safe base64, no padding), the form partition.metadata uses."""
from __future__ import annotations

import base64
import binascii
import struct
from typing import NamedTuple

from audit.errors import PayloadError
from audit.systems.kafka.formats.records import read_unsigned_varint, write_unsigned_varint

_NO_DEFAULT = object()
_FIXED = {"int8": (">b", 1), "int16": (">h", 2), "int32": (">i", 4), "int64": (">q", 8),
          "uint16": (">H", 2), "float64": (">d", 8), "bool": (">B", 1)}
_STRING_MAX = 0x7FFF  # the generated readers refuse longer strings ("had invalid length")


def _versions(text: str | None) -> tuple[int, int] | None:
    """A schema's version range as written in the JSON: "0+", "1+", "0", "0-2"."""
    if text is None:
        return None
    if text.endswith("+"):
        return int(text[:-1]), 0x7FFF
    low, _, high = text.partition("-")
    return int(low), int(high or low)


class Field(NamedTuple):
    name: str
    type: object  # a primitive name, Array or Struct
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None
    default: object


class Array(NamedTuple):
    item: object


class Struct(NamedTuple):
    name: str
    fields: tuple[Field, ...]


class Schema(NamedTuple):
    name: str
    key: int  # the api key, or the control record type
    versions: tuple[int, int]
    fields: tuple[Field, ...]


def F(name: str, type_: object, versions: str = "0+", *, nullable: str | None = None, tag: int | None = None,
      tagged: str | None = None, default: object = _NO_DEFAULT) -> Field:
    return Field(name, type_, _versions(versions), _versions(nullable), tag, _versions(tagged), default)


def _has(span: tuple[int, int] | None, version: int) -> bool:
    return span is not None and span[0] <= version <= span[1]


def message_schema(name: str, key: int, versions: str, *fields: Field) -> Schema:
    return Schema(name, key, _versions(versions), fields)


def uuid_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_bytes(text: str) -> bytes:
    """Uuid.fromString; ValueError for anything that is not 16 bytes of URL-safe base64."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not a base64 uuid: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"a uuid is 16 bytes, {text!r} decodes to {len(raw)}")
    return raw


ZERO_UUID = uuid_text(bytes(16))


def _default(field: Field) -> object:
    if field.default is not _NO_DEFAULT:
        return field.default
    kind = field.type
    if isinstance(kind, Array):
        return []
    if isinstance(kind, Struct):
        return {f.name: _default(f) for f in kind.fields}
    return {"string": "", "bytes": b"", "uuid": ZERO_UUID, "bool": False}.get(kind, 0)


# --- reading ---------------------------------------------------------------------------------------------------

class Reader:
    """A bounded cursor over one value; every failure names the source, the field path and the byte position."""

    def __init__(self, buf: bytes, pos: int, end: int, source: str):
        self.buf, self.pos, self.end, self.source = buf, pos, end, source

    def fail(self, field: str, expected: str, got: object) -> PayloadError:
        return PayloadError(self.source, field, f"{expected} (byte {self.pos} of the value)", got)

    def take(self, size: int, field: str) -> bytes:
        if size > self.end - self.pos:
            raise self.fail(field, f"{size} more bytes", f"{self.end - self.pos} bytes left")
        data = self.buf[self.pos:self.pos + size]
        self.pos += size
        return bytes(data)

    def fixed(self, kind: str, field: str) -> int | float:
        fmt, size = _FIXED[kind]
        return struct.unpack(fmt, self.take(size, field))[0]

    def uvarint(self, field: str) -> int:
        window = self.buf[self.pos:min(self.end, self.pos + 5)]
        if len(window) < 5 and all(b & 0x80 for b in window):
            raise self.fail(field, "an unsigned varint", "the end of the value")
        try:
            value, self.pos = read_unsigned_varint(self.buf, self.pos)
        except ValueError as exc:
            raise self.fail(field, "an unsigned varint of at most 5 bytes", str(exc)) from None
        return value

    def length(self, field: str, nullable: bool) -> int | None:
        """The `length + 1` prefix of a compact string, bytes or array; None for null."""
        raw = self.uvarint(field)
        if raw == 0:
            if not nullable:
                raise self.fail(field, "a value (the field is not nullable in this version)", None)
            return None
        if raw - 1 > self.end - self.pos:  # every item takes at least one byte
            raise self.fail(field, f"at most {self.end - self.pos} items or bytes", raw - 1)
        return raw - 1


def _read(inp: Reader, kind: object, version: int, nullable: bool, path: str) -> object:
    if isinstance(kind, Struct):
        return _read_struct(inp, kind.fields, version, path)
    if isinstance(kind, Array):
        count = inp.length(path, nullable)
        if count is None:
            return None
        return [_read(inp, kind.item, version, False, f"{path}[{i}]") for i in range(count)]
    if kind in _FIXED:
        value = inp.fixed(kind, path)
        return value != 0 if kind == "bool" else value
    if kind == "uuid":
        return uuid_text(inp.take(16, path))
    size = inp.length(path, nullable)
    if size is None:
        return None
    if kind == "string":
        if size > _STRING_MAX:
            raise inp.fail(path, f"a string of at most {_STRING_MAX} bytes", size)
        # String(bytes, UTF_8) in the generated readers replaces bad sequences instead of failing
        return inp.take(size, path).decode("utf-8", errors="replace")
    return inp.take(size, path)


def _read_struct(inp: Reader, fields: tuple[Field, ...], version: int, path: str) -> dict:
    out: dict = {}
    by_tag: dict[int, Field] = {}
    for f in fields:
        if f.tag is not None:
            by_tag[f.tag] = f
        if not _has(f.versions, version):
            continue
        if _has(f.tagged, version):
            out[f.name] = _default(f)
        else:
            out[f.name] = _read(inp, f.type, version, _has(f.nullable, version), f"{path}.{f.name}")
    for _ in range(inp.uvarint(f"{path}.tagged_fields")):
        tag = inp.uvarint(f"{path}.tagged_fields")
        size = inp.uvarint(f"{path}.tagged_fields[{tag}].size")
        f = by_tag.get(tag)
        if f is None:  # unknown tags are kept aside by the generated readers; nothing here needs them
            inp.take(size, f"{path}.tagged_fields[{tag}]")
            continue
        where = f"{path}.{f.name}"
        if not (_has(f.versions, version) and _has(f.tagged, version)):
            raise inp.fail(where, f"no tag {tag} in version {version}", tag)
        end = inp.pos + size
        if end > inp.end:
            raise inp.fail(where, f"{size} bytes of tagged field", f"{inp.end - inp.pos} bytes left")
        sub = Reader(inp.buf, inp.pos, end, inp.source)
        out[f.name] = _read(sub, f.type, version, _has(f.nullable, version), where)
        if sub.pos != end:
            raise inp.fail(where, f"a tagged field of exactly {size} bytes", f"{sub.pos - inp.pos} bytes read")
        inp.pos = end
    return out


def decode_message(schema: Schema, version: int, buf: bytes, pos: int, end: int, source: str, where: str) -> dict:
    """The fields of one message of `schema` at `version` in buf[pos:end]; leftover bytes are an error."""
    if not schema.versions[0] <= version <= schema.versions[1]:
        lo, hi = schema.versions
        raise PayloadError(source, f"{where}.version", f"a {schema.name} version in {lo}..{hi}", version)
    inp = Reader(buf, pos, end, source)
    fields = _read_struct(inp, schema.fields, version, f"{where}.{schema.name}")
    if inp.pos != end:
        raise inp.fail(f"{where}.{schema.name}", "the end of the message", f"{end - inp.pos} bytes of garbage")
    return fields


# --- writing (the lab writes KRaft metadata logs and snapshots with these) ----------------------------------

def _write(kind: object, value: object, version: int, nullable: bool, path: str) -> bytes:
    if isinstance(kind, Struct):
        return encode_struct(kind.fields, version, value, path)
    if value is None:
        if not nullable:
            raise ValueError(f"{path}: not nullable in version {version}")
        return b"\x00"
    if isinstance(kind, Array):
        return write_unsigned_varint(len(value) + 1) + b"".join(
            _write(kind.item, item, version, False, f"{path}[{i}]") for i, item in enumerate(value))
    if kind in _FIXED:
        return struct.pack(_FIXED[kind][0], int(value) if kind == "bool" else value)
    if kind == "uuid":
        return uuid_bytes(value)
    raw = value.encode("utf-8") if kind == "string" else bytes(value)
    return write_unsigned_varint(len(raw) + 1) + raw


def encode_struct(fields: tuple[Field, ...], version: int, values: dict, path: str = "") -> bytes:
    """The generated writers: fields of this version in order (absent ones take their defaults), then the
    tagged fields that differ from their defaults, by tag."""
    known = {f.name for f in fields}
    if set(values) - known:
        raise ValueError(f"{path}: no fields {sorted(set(values) - known)} (known: {sorted(known)})")
    out, tagged = bytearray(), []
    for f in fields:
        if not _has(f.versions, version):
            if f.name in values and values[f.name] != _default(f):
                raise ValueError(f"{path}.{f.name}: not in version {version}")
            continue
        value = values.get(f.name, _default(f))
        data = _write(f.type, value, version, _has(f.nullable, version), f"{path}.{f.name}")
        if not _has(f.tagged, version):
            out += data
        elif value != _default(f):
            tagged.append((f.tag, data))
    out += write_unsigned_varint(len(tagged))
    for tag, data in sorted(tagged):
        out += write_unsigned_varint(tag) + write_unsigned_varint(len(data)) + data
    return bytes(out)
