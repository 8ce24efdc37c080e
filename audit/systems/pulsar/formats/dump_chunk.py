"""One dump chunk as a whole, `T/dump/<ledgerId>/<firstEntryId>-<lastEntryId>.jsonl` (docs/pulsar/contracts.md):
the collector writes a chunk once every position of its key's range is answered, one line per position, so a
valid chunk holds exactly the positions its key names, each once. Strict: the first problem raises (imports
refuse the file); normalize reads line by line instead (audit/systems/pulsar/transforms/decode.py)."""
from __future__ import annotations

import re

from audit.errors import PayloadError
from audit.systems.pulsar.formats.entry import EntryGap, EntryRecord, decode_entry_line, dump_lines, line_source

CHUNK_NAME = re.compile(r"(\d+)/(\d+)-(\d+)\.jsonl")
LAYOUT = "<ledgerId>/<firstEntryId>-<lastEntryId>.jsonl"


def chunk_range(name: str, source: str) -> tuple[int, int, int]:
    """(ledger_id, first, last) from `<L>/<first>-<last>.jsonl` (the path below `dump/`)."""
    m = CHUNK_NAME.fullmatch(name)
    if m is None or int(m.group(2)) > int(m.group(3)):
        raise PayloadError(source, "key", f"dump/{LAYOUT} (first <= last)", name)
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def decode_chunk_file(data: bytes, source: str, name: str) -> list[EntryRecord | EntryGap]:
    ledger_id, first, last = chunk_range(name, source)
    items: dict[int, EntryRecord | EntryGap] = {}
    for number, line in dump_lines(data):
        src = line_source(source, number)
        item = decode_entry_line(line, src)
        if item.ledger_id != ledger_id or not first <= item.entry_id <= last:
            raise PayloadError(src, "ledger_id/entry_id", f"a position in {ledger_id}:{first}..{ledger_id}:{last} "
                               "(the chunk's key)", f"{item.ledger_id}:{item.entry_id}")
        if item.entry_id in items:
            raise PayloadError(src, "entry_id", "each position once", f"{ledger_id}:{item.entry_id} again")
        items[item.entry_id] = item
    missing = [e for e in range(first, last + 1) if e not in items]
    if missing:
        raise PayloadError(source, "<lines>", f"one line per position {ledger_id}:{first}..{ledger_id}:{last} "
                           f"({len(missing)} missing, first {ledger_id}:{missing[0]})", f"{len(items)} lines")
    return [items[e] for e in range(first, last + 1)]
