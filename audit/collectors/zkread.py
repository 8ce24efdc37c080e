"""Batched znode reads with ZooKeeper's multiRead (opcode 22, ZooKeeper >= 3.6) through a kazoo client.

kazoo sends one request per loop turn of its connection thread and hands every reply across threads, which
caps single `get_async` calls at a few thousand per second in CPython. One multiRead carries many getData
operations in one request, so that cost is paid once per batch. Each operation succeeds or fails on its own
(unlike a write `multi`): a deleted znode yields NoNodeError in its slot while the others return data.

Wire format (jute, big-endian; ZooKeeper MultiOperationRecord / MultiResponse): per operation a MultiHeader
{int type, bool done, int err} then the operation's record; a MultiHeader with done=true ends the list.
Replies: type 4 (getData) -> buffer data + Stat; type -1 (error) -> int err. The Stat is decoded as kazoo decodes
a single getData reply (kazoo.protocol.serialization.GetData: `stat_struct` into a ZnodeStat), so a batched
read yields what `client.get()` does: (data, ZnodeStat). Callers may need the Stat as evidence in its own right
(a znode's ctime can be the only record of when the thing it describes was created).
"""
from __future__ import annotations

import logging
import struct
from typing import Any, Sequence

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.serialization import read_buffer, stat_struct, write_string
from kazoo.protocol.states import ZnodeStat

MULTI_READ = 22
GET_DATA = 4
ERROR = -1
_HEADER = struct.Struct("!iBi")
_INT = struct.Struct("!i")
_END = _HEADER.pack(-1, 1, -1)
KAZOO_LOGGER = "kazoo"


def quiet_kazoo_logging() -> None:
    """Raise the kazoo loggers to at least INFO. At DEBUG kazoo logs every request and reply whole
    ("Received response ...: %r"), and a getData reply holds znode bytes such as ledger passwords. Levels
    already above INFO stay; a kazoo.* logger someone set to DEBUG is raised too."""
    kazoo = logging.getLogger(KAZOO_LOGGER)
    kazoo.setLevel(max(kazoo.level, logging.INFO))  # NOTSET would inherit the root's level
    for name, logger in list(logging.root.manager.loggerDict.items()):
        # A child left at NOTSET inherits from "kazoo"; one with its own level is raised like "kazoo".
        if name.startswith(KAZOO_LOGGER + ".") and isinstance(logger, logging.Logger) and logger.level:
            logger.setLevel(max(logger.level, logging.INFO))


class MultiReadResults(list):
    """Per-path results: (data, ZnodeStat) as `client.get()` returns them (data None for a znode without data),
    or a KazooException instance.
    The repr hides the values: kazoo logs responses at debug level, and znode data may hold secrets."""

    def __repr__(self) -> str:
        return f"<multiRead: {len(self)} results>"


class MultiReadFormatError(ValueError):
    """The reply did not have the multiRead shape; `field` names the part, `got` what was found."""

    def __init__(self, field: str, expected: str, got: Any):
        self.field, self.expected, self.got = field, expected, got
        super().__init__(f"multiRead reply: field {field}: expected {expected}, got {got!r}")


class MultiReadData:
    """A kazoo request object (kazoo calls `serialize()` and `deserialize(buffer, offset)`)."""

    type = MULTI_READ

    def __init__(self, paths: Sequence[str]):
        self.paths = list(paths)

    def __repr__(self) -> str:
        return f"<MultiReadData {len(self.paths)} paths>"

    def serialize(self) -> bytes:
        out = bytearray()
        get_data_header = _HEADER.pack(GET_DATA, 0, -1)
        for path in self.paths:
            out += get_data_header
            out += write_string(path)
            out += b"\x00"  # watch = false
        out += _END
        return bytes(out)

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> MultiReadResults:
        results = MultiReadResults()
        while True:
            op_type, done, _ = _HEADER.unpack_from(buffer, offset)
            offset += _HEADER.size
            if done:
                return results
            if op_type == GET_DATA:
                data, offset = read_buffer(buffer, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(buffer, offset))
                offset += stat_struct.size
                results.append((data, stat))
            elif op_type == ERROR:
                (code,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                results.append(EXCEPTIONS[code]())
            else:
                raise MultiReadFormatError("MultiHeader.type", f"{GET_DATA} (getData) or {ERROR} (error)", op_type)


def multi_read_async(client: Any, paths: Sequence[str]) -> Any:
    """Send one multiRead of getData for `paths` (absolute, chroot applied here) -> kazoo async result
    whose value is a MultiReadResults ((data, ZnodeStat) or an exception per path) in the order of `paths`."""
    chroot = client.chroot or ""
    request = MultiReadData([chroot + p if p != "/" or not chroot else chroot for p in paths])
    result = client.handler.async_result()
    client._call(request, result)  # kazoo has no public hook for opcodes it does not wrap
    return result
