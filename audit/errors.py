"""The one exception every decoder raises for bad input."""
from __future__ import annotations

_GOT_MAX = 80


class _Missing:
    """Marks `got` for a field that is absent (distinct from a JSON null)."""

    def __repr__(self) -> str:
        return "nothing"


MISSING = _Missing()


def _short(got: object) -> str:
    # Payloads can be megabytes; the message only needs enough to recognise the value.
    text = repr(got)
    return text if len(text) <= _GOT_MAX else text[: _GOT_MAX - 3] + "..."


class PayloadError(Exception):
    """A payload did not have the expected shape.

    `source` names where the bytes came from (file, object key or znode path), `field` the part
    that is wrong (a protobuf field name, a JSON key, "header", ...), `expected` what should be there
    and `got` what was found."""

    def __init__(self, source: str, field: str, expected: str, got: object = MISSING):
        self.source = source
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"{source}: field {field}: expected {expected}, got {_short(got)}")
