"""Every finding the audit raises for this system: check id -> (severity, meaning in one line). The findings, the GX
suites, the report and the alerts all read this table (docs/kafka/contracts.md lists the same ids).

Per partition (audit/systems/kafka/domain/partition.py), one offset is counted by at most one of committed_data_lost and
divergent_logs: offsets the truncation rule will remove from the replica that exposed them are lost, offsets it
keeps though they differ from the leader are divergent. Per MirrorMaker 2 group and partition (mm2.py)."""
from __future__ import annotations

from typing import Mapping

from audit.contracts import Check

COVERAGE = "coverage"   # the `check` of a "not judged" item: never a finding, never in CHECKS

CHECKS: Mapping[str, Check] = {
    "kafka.committed_data_lost": Check(
        "critical", "offsets below a high watermark some replica exposed are missing on the current leader or hold "
                    "a different batch there (KIP-101 scenario 1, unclean election, leader lost an unflushed tail)"),
    "kafka.divergent_logs": Check(
        "critical", "a replica keeps a batch different from the leader's at the same offset below its high "
                    "watermark, and its truncation rule will not remove it (KIP-101 scenario 2)"),
    "kafka.isr_missing_committed": Check(
        "major", "an in-sync replica's log ends below the leader's high watermark"),
    "kafka.epoch_lineage_mismatch": Check(
        "major", "two replicas' leader-epoch caches give committed offsets, which both logs hold identically, "
                 "different epochs: later truncations will be computed from a wrong history"),
    "kafka.batch_epoch_outside_cache": Check(
        "major", "committed batches whose partitionLeaderEpoch is not the epoch the replica's leader-epoch cache "
                 "gives their base offset"),
    "kafka.epoch_checkpoint_invalid": Check(
        "major", "a leader-epoch-checkpoint with negative values or epochs / start offsets not strictly increasing: "
                 "the broker refuses it or silently drops entries when it loads it"),
    "kafka.replica_missing": Check(
        "major", "a broker whose log dirs were all read holds no folder of a partition the metadata has assigned it "
                 "for longer than the settle time: that replica's data is not there (domain/assignment.py)"),
    "kafka.stray_replica": Check(
        "warning", "a broker holds a partition folder whose partition.metadata topic id is not the metadata's: a "
                   "copy of a deleted topic left behind (Kafka renames it -stray only at start-up); reported and "
                   "left out of every other rule"),
    "kafka.high_watermark_above_log_end": Check(
        "warning", "a replica's checkpointed high watermark is above its log end offset: it lost offsets it had "
                   "exposed as committed (unflushed tail, or a truncation below the high watermark)"),
    "kafka.producer_sequence_gap": Check(
        "minor", "consecutive committed batches of one producer id and epoch on the leader skip sequence numbers "
                 "(not judged on compacted topics)"),
    "kafka.follower_lagging": Check(
        "warning", "a follower's log end is provably more than kafka_follower_lag_max offsets behind the leader's"),
    "kafka.mm2_checkpoint_mismatch": Check(
        "major", "a MirrorMaker 2 checkpoint's downstream offset is not what OffsetSyncStore's translation rule "
                 "gives for its upstream offset"),
    "kafka.mm2_target_group_ahead": Check(
        "major", "a target group's committed offset is ahead of anything translation allows: a failover to the "
                 "target skips messages the group never consumed on the source", at_least=True),
    "kafka.mm2_failover_redelivery": Check(
        "minor", "a failover to the target would redeliver more messages than the redelivery tolerance",
        at_least=True),
}
