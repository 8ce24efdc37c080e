"""Checkpoint text files: the reader's exact rules (empty files, count line, Java splitting), bad input, the
broker's exact text on write."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.errors import PayloadError
from audit.systems.kafka.formats.checkpoint import (EpochCheckpointEntry, OffsetEntry, encode_leader_epoch_checkpoint,
                                            encode_offsets_checkpoint, parse_leader_epoch_checkpoint,
                                            parse_offsets_checkpoint)

REAL = Path(__file__).parents[2] / "fixtures" / "real"
SRC = "brokers/1/dir0/t-0/leader-epoch-checkpoint"


def test_real_leader_epoch_checkpoint_second_line_is_a_count():
    data = (REAL / "kafka-leader-epoch-checkpoint-01.txt").read_bytes()
    assert parse_leader_epoch_checkpoint(data, SRC) == [(0, 0), (1, 1), (2, 2)]


@pytest.mark.parametrize("data", [b"", b"0\n", b"0"])
def test_empty_or_version_only_file_reads_as_no_entries_like_the_broker(data):
    assert parse_offsets_checkpoint(data, "cleaner-offset-checkpoint") == []
    assert parse_leader_epoch_checkpoint(data, SRC) == []


def test_count_line_that_lies_names_the_file_and_line():
    with pytest.raises(PayloadError) as err:
        parse_leader_epoch_checkpoint(b"0\n3\n0 0\n1 5\n", SRC)
    assert err.value.source == SRC
    assert err.value.field == "line 2 (byte 2) entry count"
    assert "[3] entries" in err.value.expected and err.value.got == "2 entry lines"


def test_unknown_version_is_refused():
    with pytest.raises(PayloadError) as err:
        parse_offsets_checkpoint(b"1\n0\n", "replication-offset-checkpoint")
    assert err.value.field == "line 1 (byte 0) version" and err.value.got == 1


@pytest.mark.parametrize("line, byte", [
    ("t 0", 4),              # two parts for an offsets line
    (" t 0 5", 4),           # Java's split keeps a leading empty part: four parts
    ("t x 5", 4),            # partition not an int
    ("t 2147483648 5", 4),   # partition beyond int32
    ("t 0 5.0", 4),
])
def test_malformed_offset_lines_name_line_and_byte(line, byte):
    data = f"0\n1\n{line}\n".encode()
    with pytest.raises(PayloadError) as err:
        parse_offsets_checkpoint(data, "recovery-point-offset-checkpoint")
    assert err.value.field == f"line 3 (byte {byte})"
    assert err.value.got == line


def test_java_whitespace_and_line_ends_are_accepted():
    data = b"0\r\n2\r\nt\t0   5 \rt 1 9223372036854775807"
    assert parse_offsets_checkpoint(data, "x") == [OffsetEntry("t", 0, 5), OffsetEntry("t", 1, (1 << 63) - 1)]


def test_blank_entry_line_is_malformed():
    with pytest.raises(PayloadError):
        parse_leader_epoch_checkpoint(b"0\n1\n\n", SRC)


def test_non_utf8_is_refused_with_its_offset():
    with pytest.raises(PayloadError) as err:
        parse_offsets_checkpoint(b"0\n1\nt\xff 0 1\n", "x")
    assert err.value.field == "byte 5"


def test_encoders_write_the_brokers_exact_text():
    assert encode_offsets_checkpoint([OffsetEntry("one", 0, 11), ("__consumer_offsets", 38, 1)]) == \
        b"0\n2\none 0 11\n__consumer_offsets 38 1\n"
    assert encode_leader_epoch_checkpoint([EpochCheckpointEntry(0, 0), (3, 120)]) == b"0\n2\n0 0\n3 120\n"
    assert encode_leader_epoch_checkpoint([]) == b"0\n0\n"


def test_encoder_refuses_a_topic_the_reader_could_not_split_back():
    with pytest.raises(ValueError):
        encode_offsets_checkpoint([("a b", 0, 1)])


topics = st.text(alphabet="abcxyz._-0123456789", min_size=1, max_size=20)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(topics, int32, int64), max_size=20), st.lists(st.tuples(int32, int64), max_size=20))
def test_round_trip(offsets, epochs):
    assert parse_offsets_checkpoint(encode_offsets_checkpoint(offsets), "x") == offsets
    assert parse_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(epochs), "x") == epochs
