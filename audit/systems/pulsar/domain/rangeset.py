"""`individuallyDeletedMessages`: a set of open-closed ranges `(lower..upper]` of acked positions
(docs/formats/pulsar.md §2.3)."""
from __future__ import annotations

import bisect
import re
from typing import Iterable, Iterator

from audit.systems.pulsar.domain.positions import POSITION_PATTERN, Position, parse_position
from audit.errors import PayloadError

FIELD = "individuallyDeletedMessages"

Range = tuple[Position, Position]

# One range, `..` (current) or U+2025 `‥` (old Guava). No whitespace inside a range has been observed.
_RANGE = re.compile(rf"\(({POSITION_PATTERN})(?:\.\.|\u2025)({POSITION_PATTERN})\]")
_SPACE = re.compile(r"\s*")


def _coalesce(ranges: Iterable[Range]) -> tuple[Range, ...]:
    """Sort and merge overlapping or touching ranges: (a..b] + (b..c] = (a..c], as Guava's TreeRangeSet does.
    Ranges that merely look adjacent across a gap, e.g. (1:1..1:3] and (1:4..1:5], stay apart (1:4 is a hole)."""
    out: list[list[Position]] = []
    for lower, upper in sorted(ranges):
        if out and lower <= out[-1][1]:
            if upper > out[-1][1]:
                out[-1][1] = upper
        else:
            out.append([lower, upper])
    return tuple((lo, hi) for lo, hi in out)


class AckRanges:
    """Immutable, sorted, coalesced set of non-empty open-closed ranges (lower, upper] over Positions."""

    __slots__ = ("_ranges", "_uppers")

    def __init__(self, ranges: Iterable[Range] = ()):
        ranges = tuple(ranges)
        for lower, upper in ranges:
            if not (isinstance(lower, Position) and isinstance(upper, Position)):
                raise TypeError(f"range bounds must be Positions, got {lower!r}, {upper!r}")
            if not lower < upper:
                raise ValueError(f"empty or inverted range ({lower}..{upper}]")
        merged = _coalesce(ranges)
        object.__setattr__(self, "_ranges", merged)
        object.__setattr__(self, "_uppers", tuple(hi for _, hi in merged))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("AckRanges is immutable")

    @property
    def ranges(self) -> tuple[Range, ...]:
        return self._ranges

    def contains(self, pos: Position) -> bool:
        """True when some range has lower < pos <= upper."""
        i = bisect.bisect_left(self._uppers, pos)  # first range whose upper >= pos
        return i < len(self._ranges) and self._ranges[i][0] < pos

    def __contains__(self, pos: object) -> bool:
        return isinstance(pos, Position) and self.contains(pos)

    def union(self, other: AckRanges) -> AckRanges:
        return AckRanges(self._ranges + other._ranges)

    def below(self, position: Position) -> tuple[Range, ...]:
        """Ranges whose lower bound is below `position` (a markDeletePosition): each one violates the
        invariant "first range lower bound >= markDeletePosition" (docs/formats/pulsar.md §2.3)."""
        return tuple(r for r in self._ranges if r[0] < position)

    def to_string(self) -> str:
        """The default broker spelling (OpenLongPairRangeSet): `[(3:4..3:6],(3:8..3:9]]`."""
        return "[" + ",".join(f"({lo}..{hi}]" for lo, hi in self._ranges) + "]"

    def __len__(self) -> int:
        return len(self._ranges)

    def __iter__(self) -> Iterator[Range]:
        return iter(self._ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AckRanges) and self._ranges == other._ranges

    def __hash__(self) -> int:
        return hash(self._ranges)

    def __repr__(self) -> str:
        return f"AckRanges({self.to_string()})"


def parse_individually_deleted(text: str, source: str) -> AckRanges:
    """Parse every observed spelling: `[]`, "," or ", " between ranges, `..` or U+2025 `‥`, a trailing
    `, ]`, and ranges spanning ledgers. Overlapping or touching input ranges are coalesced."""
    if not isinstance(text, str):
        raise PayloadError(source, FIELD, "a string '[(L:E..L:E],...]'", text)
    body = text.strip()
    if len(body) < 2 or body[0] != "[" or body[-1] != "]":
        raise PayloadError(source, FIELD, "a range list enclosed in '[' and ']'", text)
    inner, base = body[1:-1], text.index("[") + 1
    ranges: list[Range] = []
    pos = _SPACE.match(inner, 0).end()
    while pos < len(inner):
        m = _RANGE.match(inner, pos)
        if m is None:
            raise PayloadError(source, FIELD, f"a range '(L:E..L:E]' at offset {base + pos}", inner[pos:])
        lower = parse_position(m.group(1), source, FIELD)
        upper = parse_position(m.group(2), source, FIELD)
        if not lower < upper:
            raise PayloadError(source, FIELD, f"lower < upper in the range at offset {base + pos}", m.group(0))
        ranges.append((lower, upper))
        pos = _SPACE.match(inner, m.end()).end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise PayloadError(source, FIELD, f"',' or ']' after the range at offset {base + m.start()}",
                                   inner[pos:])
            pos = _SPACE.match(inner, pos + 1).end()  # a trailing ", ]" ends the loop here
    return AckRanges(ranges)
