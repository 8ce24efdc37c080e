"""Checkpoint text files: leader-epoch-checkpoint and the per-log-dir offset checkpoints (docs/formats/kafka.md §1).

The broker's checkpoint reader and writer and the entry formats of the offsets and epoch files (version 0) are
described in docs/formats/kafka.md §1; the layout is the same since 0.11.

Layout: `version\\ncount\\nentry\\n...`, UTF-8, lines as BufferedReader.readLine splits them (\\n, \\r or \\r\\n).
The reader is followed exactly: an empty file, or one holding only the version line, reads as no entries (a
broker that created the file and crashed before the first write leaves it empty; the real fixture's
cleaner-offset-checkpoint is 0 bytes); an entry line is split on runs of Java's `\\s` and must have exactly 3
(offsets) or 2 (epochs) parts; the count line must equal the number of entry lines."""
from __future__ import annotations

import re
from typing import Callable, Iterable, NamedTuple, TypeVar

from audit.errors import PayloadError

VERSION = 0  # OffsetCheckpointFile.CURRENT_VERSION, LeaderEpochCheckpointFile.CURRENT_VERSION
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                           "log-start-offset-checkpoint", CLEANER_CHECKPOINT_FILE)
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
# the collector's second copy of cleaner-offset-checkpoint, read after the dir's segments (the raw layout,
# docs/kafka/contracts.md): the log cleaner checkpoints a pass only after it rewrote the batches
CLEANER_REREAD = CLEANER_CHECKPOINT_FILE + ".after-segments"

_LINE_END = re.compile(r"\r\n|\r|\n")
_JAVA_SPACE = re.compile(r"[ \t\n\x0b\f\r]+")   # Pattern "\\s+" without UNICODE_CHARACTER_CLASS
_JAVA_INT = re.compile(r"[+-]?[0-9]+")          # what Integer.parseInt / Long.parseLong accept (ASCII digits)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)

T = TypeVar("T")


class OffsetEntry(NamedTuple):
    topic: str
    partition: int
    offset: int


class EpochCheckpointEntry(NamedTuple):
    epoch: int
    start_offset: int


def java_lines(text: str) -> list[tuple[int, str]]:
    """(character offset, line) pairs as readLine returns them: a final terminator does not start a line."""
    lines, start = [], 0
    for match in _LINE_END.finditer(text):
        lines.append((start, text[start:match.start()]))
        start = match.end()
    if start < len(text):
        lines.append((start, text[start:]))
    return lines


def java_split(line: str) -> list[str]:
    """String.split("\\\\s+"): a leading run gives a leading empty part; trailing empty parts are dropped."""
    parts = _JAVA_SPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_int(text: str, bounds: tuple[int, int] = _INT32) -> int | None:
    """Integer.parseInt / Long.parseLong, or None where Java throws NumberFormatException."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def _decode_text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(source, f"byte {exc.start}", "UTF-8 text", data[exc.start:exc.start + 8]) from None


def _where(number: int, char_offset: int, text: str) -> str:
    return f"line {number} (byte {len(text[:char_offset].encode('utf-8'))})"


def _read(data: bytes, source: str, parse_entry: Callable[[list[str]], T | None], entry_shape: str) -> list[T]:
    text = _decode_text(data, source)
    lines = java_lines(text)
    if not lines:
        return []   # CheckpointReadBuffer.read: no version line = no entries
    offset, line = lines[0]
    version = java_int(line)
    if version is None:
        raise PayloadError(source, _where(1, offset, text) + " version", "an int (Malformed line)", line)
    if version != VERSION:
        raise PayloadError(source, _where(1, offset, text) + " version",
                           f"version {VERSION} (Unrecognised version)", version)
    if len(lines) == 1:
        return []
    offset, line = lines[1]
    expected = java_int(line)
    if expected is None:
        raise PayloadError(source, _where(2, offset, text) + " entry count", "an int (Malformed line)", line)
    entries = []
    for number, (offset, line) in enumerate(lines[2:], start=3):
        entry = parse_entry(java_split(line))
        if entry is None:
            raise PayloadError(source, _where(number, offset, text), f"{entry_shape} (Malformed line)", line)
        entries.append(entry)
    if len(entries) != expected:
        raise PayloadError(source, _where(2, lines[1][0], text) + " entry count",
                           f"[{expected}] entries as the count line says", f"{len(entries)} entry lines")
    return entries


def _offset_entry(parts: list[str]) -> OffsetEntry | None:
    if len(parts) != 3:
        return None
    partition, offset = java_int(parts[1]), java_int(parts[2], _INT64)
    return None if partition is None or offset is None else OffsetEntry(parts[0], partition, offset)


def _epoch_entry(parts: list[str]) -> EpochCheckpointEntry | None:
    if len(parts) != 2:
        return None
    epoch, offset = java_int(parts[0]), java_int(parts[1], _INT64)
    return None if epoch is None or offset is None else EpochCheckpointEntry(epoch, offset)


def parse_offsets_checkpoint(data: bytes, source: str) -> list[OffsetEntry]:
    """replication-offset-checkpoint (high watermarks), recovery-point-, log-start- and cleaner-offset-checkpoint:
    `<topic> <partition> <offset>` lines, in file order (the broker writes them in hash-map order)."""
    return _read(data, source, _offset_entry, "'<topic> <partition> <offset>'")


def parse_leader_epoch_checkpoint(data: bytes, source: str) -> list[EpochCheckpointEntry]:
    """leader-epoch-checkpoint: `<epoch> <startOffset>` lines. Ordering is not checked here (the domain's
    checkpoint rules report it); the broker itself loads whatever the lines say."""
    return _read(data, source, _epoch_entry, "'<epoch> <startOffset>'")


def _write(lines: list[str]) -> bytes:
    # CheckpointWriteBuffer: version, count, entries, each ended by BufferedWriter.newLine ("\n" on Linux).
    return "".join(f"{line}\n" for line in [str(VERSION), str(len(lines)), *lines]).encode("utf-8")


def encode_offsets_checkpoint(entries: Iterable[OffsetEntry | tuple[str, int, int]]) -> bytes:
    lines = []
    for topic, partition, offset in entries:
        if not topic or java_split(topic) != [topic]:
            raise ValueError(f"topic {topic!r} cannot be written to a checkpoint line")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return _write(lines)


def encode_leader_epoch_checkpoint(entries: Iterable[EpochCheckpointEntry | tuple[int, int]]) -> bytes:
    return _write([f"{int(epoch)} {int(start)}" for epoch, start in entries])
