"""The default lab: every injected fault shows up in the emitted payloads exactly as the ground truth claims,
checked by decoding those payloads and counting entry by entry (tests/lab/bookkeeper/payload_oracle.py)."""
from __future__ import annotations

import json

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED, OPEN
from audit.systems.bookkeeper.formats import ledger_metadata
from lab.bookkeeper import build_lab, emit
from tests.lab.bookkeeper.payload_oracle import replica_bands, expected_on, read_snapshot, replica_counts
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000


@pytest.fixture(scope="module")
def run():
    lab = build_lab({"seed": 7}, AS_OF)
    sink = DictSink()
    truth = emit(lab, sink)
    return lab, sink, read_snapshot(sink), truth


def faults_of(truth, kind):
    found = [f for f in truth["faults"] if f["kind"] == kind]
    assert found, f"default fault set lacks {kind}"
    return found


def findings(truth, ledger_id=None, check=None):
    return [f for f in truth["findings"]
            if (ledger_id is None or f["ledger_id"] == ledger_id) and (check is None or f["check"] == check)]


def test_count_findings_match_a_per_entry_count_over_the_payloads(run):
    lab, sink, snap, truth = run
    expected = set()
    for lid, md in snap.metadata.items():
        if md.state != CLOSED or md.last_entry_id < 0:
            continue
        c = replica_counts(snap, lid)
        expected |= {(check, lid, n) for check, n in replica_bands(c)}
    claimed = {(f["check"], f["ledger_id"], f["entry_count"]) for f in truth["findings"]
               if f["check"] in ("bk.entries_lost", "bk.entries_below_ack_quorum", "bk.entries_below_write_quorum")}
    assert claimed == expected
    assert {c for c, _, _ in expected} == {"bk.entries_lost", "bk.entries_below_ack_quorum",
                                           "bk.entries_below_write_quorum"}


def test_healthy_ledgers_are_the_majority_and_all_replicated(run):
    lab, sink, snap, truth = run
    flagged = {f["ledger_id"] for f in truth["findings"]}
    assert len(snap.metadata) + len(snap.deleted) == 60 == truth["summary"]["ledgers"]
    assert len(snap.metadata) - len(flagged) > len(snap.metadata) / 2
    for lid in set(snap.metadata) - flagged:
        md = snap.metadata[lid]
        if md.state == CLOSED:
            c = replica_counts(snap, lid)
            assert c["below_write"] == 0 and c["entries"] == md.last_entry_id + 1


def test_metadata_mixes_format_versions_and_names_the_pulsar_topic(run):
    lab, sink, snap, truth = run
    versions = {md.format_version for md in snap.metadata.values()}
    assert versions == {1, 2, 3}
    for md in snap.metadata.values():
        if md.format_version > 1:
            assert md.custom_metadata["application"] == b"pulsar"
            assert md.custom_metadata["component"] == b"managed-ledger"
            assert md.custom_metadata["pulsar/managed-ledger"].decode().count("/persistent/") == 1
            assert md.has_password
        assert md == lab.metadata(md.ledger_id)   # decoding the stored bytes gives back the simulated metadata


def test_stored_znodes_carry_no_password_but_zookeeper_ones_do(run):
    lab, sink, snap, truth = run
    for lid in lab.ledger_ids:
        stored = sink[f"ledger-metadata/{lab.znode_path(lid)}"]
        in_zk = lab.znode(lid, with_password=True)
        assert ledger_metadata.redact_password(in_zk, "zk") == stored
        if lab.metadata(lid).format_version > 1:
            assert in_zk != stored and b"lab-pw-" in in_zk and b"lab-pw-" not in stored


def test_every_ensemble_bookie_is_asked_about_every_ledger(run):
    lab, sink, snap, truth = run
    for lid, md in snap.metadata.items():
        for seg in md.segments:
            for b in seg.ensemble:
                # read probes need the ledger's end: only CLOSED ledgers are probed
                probed_later = lab.evidence(b) == "read_probe" and md.state != CLOSED
                assert (b, lid) in snap.answers or (b, lid) in snap.errors or probed_later
    assert set(snap.racks) == set(lab.bookies) and len(set(snap.racks.values())) == 3
    assert snap.bookies["cookies"] == sorted(lab.bookies)


def test_bookie_crash_leaves_ledgers_naming_a_dead_bookie(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "bookie_crash"):
        dead = fault["params"]["bookie"]
        assert dead not in snap.bookies["available"] + snap.bookies["readonly"] and dead in snap.bookies["cookies"]
        across = 0
        for lid in fault["ledgers"]:
            assert [f["bookie"] for f in findings(truth, lid, "bk.ensemble_dead_bookie")] == [dead]
            assert snap.errors[(dead, lid)]["error"] == "unreachable"
            md = snap.metadata[lid]
            if len(md.segments) > 1:   # written across the crash: the writer replaced the dead bookie
                across += 1
                assert dead in md.segments[0].ensemble and dead not in md.segments[-1].ensemble
            assert replica_counts(snap, lid)["below_write"] == 0   # its entries are unavailable, not missing
        assert across == fault["params"]["ledgers_across"]
        # every ledger naming the dead bookie is reported, not only the planned ones
        naming = {lid for lid, md in snap.metadata.items() if any(dead in s.ensemble for s in md.segments)}
        assert {f["ledger_id"] for f in findings(truth, check="bk.ensemble_dead_bookie")} == naming
        assert dead in truth["summary"]["unavailable_bookies"]


@pytest.mark.parametrize("kind", ["ensemble_change", "bookie_readonly"])
def test_ensemble_change_is_healthy(run, kind):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, kind):
        bookie = fault["params"]["bookie"]
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert len(md.segments) == 2
            second = md.segments[1].first_entry_id
            assert bookie in md.segments[0].ensemble and bookie not in md.segments[1].ensemble
            # the bookie stopped at the change: it holds nothing of the new segment
            assert max(snap.answers[(bookie, lid)][1]) < second
            assert findings(truth, lid) == []
            assert replica_counts(snap, lid)["below_write"] == 0
    if kind == "bookie_readonly":
        assert [fault["params"]["bookie"]] == snap.bookies["readonly"]


def test_replaced_ensemble_race_leaves_entries_on_bookies_the_metadata_does_not_name(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "replaced_ensemble_race"):
        in_flight = fault["params"]["in_flight"]
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert (md.ensemble_size, md.write_quorum_size, md.ack_quorum_size) == (2, 2, 1)
            assert len(md.segments) == 2
            k = md.segments[1].first_entry_id
            raced = range(k, k + in_flight)
            new = md.segments[1].ensemble
            for e in raced:
                assert all(e not in (lab.entries_on(b, lid) or []) for b in new)
                old_holders = [b for b in lab.bookies if e in (lab.entries_on(b, lid) or [])]
                assert len(old_holders) == 2 and not set(old_holders) & set(new)
            assert all(e in lab.entries_on(b, lid) for b in new for e in range(k + in_flight, md.last_entry_id + 1))
            counts = {f["check"]: f["entry_count"] for f in findings(truth, lid) if "entry_count" in f}
            assert counts == {"bk.entries_lost": in_flight, "bk.entries_outside_ensemble": in_flight}
            # the old bookie still named by segment 0 answers with the raced entries it should not have
            seen = [o for o in truth["outside_ensemble"] if o["ledger_id"] == lid]
            assert seen and all(o["entry_count"] == in_flight for o in seen)
            for o in seen:
                held = snap.answers[(o["bookie"], lid)][1]
                assert held - expected_on(md, o["bookie"]) == set(raced)
            assert replica_counts(snap, lid)["lost"] == in_flight


def test_disk_loss_answers_enoledger_for_the_lost_ledgers_only(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "disk_loss"):
        bookie = fault["params"]["bookie"]
        assert bookie in snap.bookies["available"]
        kinds = set()
        for lid in fault["ledgers"]:
            assert _holds_nothing(snap.answers[(bookie, lid)])
            md = snap.metadata[lid]
            c = replica_counts(snap, lid)
            assert c["below_write"] == len(expected_on(md, bookie)) > 0
            got = {f["check"]: f["entry_count"] for f in findings(truth, lid)}
            assert got == dict(replica_bands(c))   # disjoint bands: one finding per entry
            kinds.add(c["below_ack"] > 0)
        assert kinds == {True, False}   # Qw-1 < Qa for some ledgers, >= Qa for others
        others = [lid for (b, lid), (status, _) in snap.answers.items() if b == bookie and lid not in fault["ledgers"]]
        assert others and all(snap.answers[(bookie, lid)][1] for lid in others)


def test_unreachable_bookie_is_a_coverage_gap_not_missing_data(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "unreachable_bookie"):
        bookie = fault["params"]["bookie"]
        assert bookie in snap.bookies["available"] and not lab.reachable(bookie)
        naming = sorted(lid for (b, lid) in snap.errors if b == bookie)
        assert set(fault["ledgers"]) <= set(naming)
        gaps = sorted(g["ledger_id"] for g in truth["coverage_gaps"] if g["bookie"] == bookie)
        assert gaps == naming
        for lid in fault["ledgers"]:
            assert findings(truth, lid) == []
            # entries placed on it are not counted missing
            assert replica_counts(snap, lid)["below_write"] == 0


def test_closed_ledger_without_data(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "closed_without_data"):
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert md.state == CLOSED and md.length > 0
            assert all(_holds_nothing(snap.answers[(b, lid)]) for s in md.segments for b in s.ensemble)
            n = md.last_entry_id + 1
            got = {f["check"]: f["entry_count"] for f in findings(truth, lid)}
            assert got == {"bk.entries_lost": n}


def test_open_ledger_being_written_is_not_flagged(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "open_ledger_writing"):
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert md.state == OPEN and md.last_entry_id == -1 and AS_OF - snap.stats[lid]["ctime"] < 10 * 60_000
            assert findings(truth, lid) == []
            # writes went on while the bookies were asked: they hold entries added after the metadata was read
            newest = max(max(held) for (b, l), (_, held) in snap.answers.items() if l == lid and held)
            assert newest >= lab.state.tail_after_snapshot[lid]


def test_abandoned_open_ledger_is_open_too_long(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "open_ledger_abandoned"):
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert md.state == OPEN
            (f,) = findings(truth, lid)
            assert f["check"] == "bk.ledger_open_too_long"
            # a default client stores no ctime: the znode's ZooKeeper ctime is the creation time
            ctime = md.ctime if md.ctime else snap.stats[lid]["ctime"]
            assert f["open_age_ms"] == AS_OF - ctime >= fault["params"]["age_hours"] * 3_600_000


def test_placement_violation_puts_every_write_set_in_one_rack(run):
    lab, sink, snap, truth = run
    violating = {f["ledger_id"] for f in findings(truth, check="bk.placement_violation")}
    for fault in faults_of(truth, "placement_violation"):
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert len({snap.racks[b] for s in md.segments for b in s.ensemble}) == 1
        assert violating == set(fault["ledgers"])
    for lid, md in snap.metadata.items():
        if lid not in violating:
            for s in md.segments:
                for i in range(md.ensemble_size):
                    ws = {snap.racks[s.ensemble[(i + w) % md.ensemble_size]] for w in range(md.write_quorum_size)}
                    assert len(ws) >= 2


def test_ground_truth_is_json_and_names_checks_from_the_contract(run):
    lab, sink, snap, truth = run
    allowed = {"bk.entries_lost", "bk.entries_below_ack_quorum", "bk.entries_below_write_quorum",
               "bk.ensemble_unknown_bookie", "bk.ensemble_dead_bookie", "bk.placement_violation",
               "bk.metadata_invariant", "bk.ledger_open_too_long", "bk.entries_outside_ensemble"}
    assert json.loads(json.dumps(truth)) == truth
    for f in truth["findings"]:
        assert f["check"] in allowed and f["cluster"] == "bk-lab" and f["ledger_id"] in snap.metadata
        assert f.get("entry_count", 1) > 0 and f["detail"]


def _holds_nothing(answer) -> bool:
    status, held = answer
    return status == "ENOLEDGER" or (status == "PROBED" and not held)


def test_default_clients_store_no_ctime_and_every_znode_has_its_stat(run):
    lab, sink, snap, truth = run
    stored = [md for md in snap.metadata.values() if md.ctime is not None]
    assert 0 < len(stored) < len(snap.metadata) / 2     # storeSystemTimeAsLedgerCreationTime is false by default
    assert set(snap.stats) == set(snap.metadata) | set(snap.deleted)
    for lid, stat in snap.stats.items():
        assert stat["ctime"] == lab.state.znode_times[lid][0] <= AS_OF
        assert stat["dataLength"] == len(lab.znode(lid, with_password=True))


def test_dbledgerstorage_bookies_never_answer_the_list_and_their_evidence_comes_another_way(run):
    lab, sink, snap, truth = run
    kinds = {b: lab.storage(b) for b in lab.bookies}
    assert set(kinds.values()) == {"DbLedgerStorage", "SortedLedgerStorage"}
    named = {b for md in snap.metadata.values() for s in md.segments for b in s.ensemble}
    for b, kind in kinds.items():
        listed = any(k.startswith(f"entries-of-ledger/{b}/") and k.endswith(".pb") for k in sink)
        assert listed == (kind == "SortedLedgerStorage" and lab.reachable(b) and b in named)
    evidence = {lab.evidence(b) for b in lab.bookies if kinds[b] == "DbLedgerStorage" and lab.reachable(b)}
    assert evidence == {"location_index", "read_probe"}
    for b, inventory in snap.inventories.items():
        # what the index holds: a recently closed ledger's tail is still in the write cache
        assert inventory["complete"] and inventory["entries"] == sum(map(len, lab.index_holdings(b).values()))
    assert snap.probe_bookies and all(doc["share_percent"] == 100 for doc in snap.probe_bookies.values())


def test_slow_bookie_and_rereplication_leave_entries_outside_the_ensemble_without_a_finding(run):
    lab, sink, snap, truth = run
    for fault in faults_of(truth, "slow_bookie"):
        slow = fault["params"]["bookie"]
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert findings(truth, lid) == [] and len(md.segments) == 2
            changed_at = md.segments[1].first_entry_id
            assert slow not in md.segments[1].ensemble
            assert changed_at in lab.entries_on(slow, lid)   # persisted after the client gave up on it
    for fault in faults_of(truth, "rereplication"):
        lost = fault["params"]["bookie"]
        assert lost in snap.bookies["available"]             # it came back
        for lid in fault["ledgers"]:
            md = snap.metadata[lid]
            assert findings(truth, lid) == [] and "rereplication" in lab.state.roles[lid]
            assert all(lost not in s.ensemble for s in md.segments)
            assert lab.entries_on(lost, lid)                 # with its old copies
            assert replica_counts(snap, lid)["below_write"] == 0


def test_ledgers_deleted_by_retention_during_collection_are_noted_and_not_judged(run):
    lab, sink, snap, truth = run
    assert snap.deleted and set(snap.deleted) == lab.state.deleted_during_collection
    for lid, md in snap.deleted.items():
        assert md.state == CLOSED and md.last_entry_id >= 0        # read while it existed, with its entries
        # its bookies' garbage collector ran before they were asked: every evidence says "holds nothing"
        for b in {b for s in md.segments for b in s.ensemble}:
            assert lab.entries_on(b, lid) is None
        assert findings(truth, lid) == []
        assert lid not in {r["ledger_id"] for r in truth["replicas"]}
