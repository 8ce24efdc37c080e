"""The Kafka dry-run repair planner: which replica to rebuild or let truncate, where an election lost data (offsets,
producers, time span, who holds them), and the exact consumer-group reset (command and admin API call) for a
MirrorMaker 2 target group; bad evidence is an error item naming the finding and the field."""
import json
import shlex

import pytest

from audit.config.estate import parse_estate
from audit.contracts import RunOutputs
from audit.systems.kafka.repair.plan import plan_findings, plan_run, reset_command
from tests.report.systems import write_table


def kv(check, count=1, cluster="east", **ev):
    return {"run_id": "r1", "system": "kafka", "cluster": cluster, "check": check, "severity": "critical",
            "subject": "s", "entry_count": count, "message": "m", "evidence": json.dumps(ev)}


LOST = kv("kafka.committed_data_lost", 5, topic="t", partition=0, broker=1, offset_from=10, offset_to=14, leader=1,
          ranges=[{"from": 10, "to": 14}],
          exposed_by=[{"broker": 3, "ranges": [{"from": 12, "to": 14, "proof": "hw"}], "producer_ids": [9, 7],
                       "first_timestamp_ms": 500, "last_timestamp_ms": 900, "high_watermark": 15},
                      {"broker": 2, "ranges": [{"from": 10, "to": 11, "proof": "hw"}], "producer_ids": [7],
                       "first_timestamp_ms": 300, "last_timestamp_ms": 400, "high_watermark": 12}])
AHEAD = kv("kafka.mm2_target_group_ahead", 4, topic="orders", partition=2, group="pay ments", source="west",
           offset_from=40, offset_to=43, rule="3.4.1+", translated=40, bounds=[38, 40], upstream_committed=100,
           target_committed=44)
BEHIND = kv("kafka.mm2_failover_redelivery", 6, topic="orders", partition=2, group="g2", source="west",
            offset_from=30, offset_to=35, bounds=[36, 37], target_committed=30, translated=37)


def test_data_loss_plan_names_offsets_producers_time_span_and_holders():
    plans, errors = plan_findings([LOST], log_dirs={("east", 3, "t", 0): "/data/k3"})
    assert errors == []
    (p,) = plans
    assert (p["kind"], p["topic"], p["partition"], p["offset_from"], p["offset_to"], p["entry_count"]) == (
        "data_loss", "t", 0, 10, 14, 5)
    assert p["producer_ids"] == [7, 9] and p["time_span_ms"] == [300, 900] and p["dry_run"] is True
    assert [(h["broker"], h["partition_dir"]) for h in p["replicas_holding_them"]] == [(2, None), (3, "/data/k3/t-0")]
    assert "copy the segments of /data/k3/t-0 holding offsets 12..14" in p["steps"][1]
    assert "t-0 on broker 2 holding offsets 10..11" in p["steps"][0]
    assert len(p["plan_id"]) == 64


def test_replica_plans_merge_reasons_and_take_the_strongest_action():
    vs = [kv("kafka.high_watermark_above_log_end", topic="t", partition=1, broker=2),
          kv("kafka.divergent_logs", 3, topic="t", partition=1, broker=2, offset_from=4, offset_to=6),
          kv("kafka.high_watermark_above_log_end", topic="t", partition=1, broker=3),
          kv("kafka.producer_sequence_gap", topic="t", partition=1, broker=1),     # nothing to repair
          kv("kafka.follower_lagging", topic="t", partition=1, broker=3)]
    plans, errors = plan_findings(vs, log_dirs={("east", 2, "t", 1): "/var/kafka"})
    assert errors == []
    assert [(p["broker"], p["action"], [r["check"] for r in p["reasons"]]) for p in plans] == [
        (2, "rebuild", ["kafka.divergent_logs", "kafka.high_watermark_above_log_end"]),
        (3, "truncate", ["kafka.high_watermark_above_log_end"])]
    assert plans[0]["partition_dir"] == "/var/kafka/t-1" and "move /var/kafka/t-1 aside" in plans[0]["steps"][1]
    assert plans[1]["partition_dir"] == "<log dir of broker 3>/t-1"


def test_group_reset_command_and_admin_call():
    plans, errors = plan_findings([AHEAD, BEHIND], bootstrap={"east": "k1:9092,k2:9092"},
                                  separators={("east", "west"): "_"})
    assert errors == []
    behind, ahead = plans   # sorted by group
    # back to the LOWEST offset the translation allows: at least once, never a skip (the high bound may be past
    # what the group read: the pre-3.4.1 overshoot)
    assert (ahead["topic"], ahead["upstream_topic"], ahead["reset_to"], ahead["target_committed"]) == (
        "west_orders", "orders", 38, 44)
    assert shlex.split(ahead["command"]) == [
        "kafka-consumer-groups.sh", "--bootstrap-server", "k1:9092,k2:9092", "--group", "pay ments",
        "--reset-offsets", "--topic", "west_orders:2", "--to-offset", "38", "--dry-run"]
    assert ahead["admin_api"] == {"call": "AlterConsumerGroupOffsets", "group_id": "pay ments",
                                  "offsets": [{"topic": "west_orders", "partition": 2, "offset": 38}]}
    assert ahead["warnings"] == [] and behind["warnings"] == []
    assert behind["reset_to"] == 36   # forward to the lowest offset the source group proves consumed
    assert "still 30" in behind["preconditions"][1]


def test_a_reset_under_mirrormaker_2_before_3_4_1_says_it_will_be_pushed_forward_again():
    (p,), errors = plan_findings([{**AHEAD, "evidence": AHEAD["evidence"].replace('"3.4.1+"', '"pre-3.4.1"')}])
    assert errors == [] and p["reset_to"] == 38
    (warning,) = p["warnings"]
    assert "pushed forward again" in warning and "sync.group.offsets.enabled" in warning


def test_reset_command_without_an_estate_names_what_to_fill_in():
    (p,), _ = plan_findings([AHEAD])
    assert "'<bootstrap servers of east>'" in p["command"] and "west.orders:2" in p["command"]
    assert reset_command("h:1", "g", "t", 0, 5).endswith("--to-offset 5 --dry-run")


@pytest.mark.parametrize("violation, field", [
    (kv("kafka.divergent_logs", topic="t", partition=1), "evidence.broker"),
    (kv("kafka.committed_data_lost", topic="t", partition=0, offset_from=1, offset_to=2, exposed_by="x"),
     "evidence.exposed_by"),
    (kv("kafka.mm2_failover_redelivery", topic="o", partition=0, group="g", source="w", bounds=[None, 3],
        target_committed=1), "evidence.bounds"),
    ({**AHEAD, "evidence": "not json"}, "evidence.group"),
])
def test_bad_evidence_is_an_error_item_naming_the_field(violation, field):
    plans, errors = plan_findings([violation, BEHIND])
    assert len(plans) == 1 and len(errors) == 1
    assert errors[0]["field"] == field and errors[0]["status"] == "error" and errors[0]["system"] == "kafka"
    assert errors[0]["check"] == violation["check"]


def test_same_findings_same_plans_and_ids():
    one, _ = plan_findings([LOST, AHEAD, BEHIND])
    two, _ = plan_findings([BEHIND, AHEAD, LOST, kv("pulsar.failover_loss", system="pulsar")])
    assert one == two


def test_plan_run_reads_findings_log_dirs_and_the_estate(tmp_path):
    write_table(tmp_path, "tables/kafka_replicas", [{"cluster": "east", "broker": 2, "topic": "t", "partition": 1,
                                                     "log_dir": "/d2"}])
    estate = parse_estate("estate: e\nstore: {uri: file:///tmp/x}\nsystems:\n  kafka:\n"
                          "    - {name: east, source: admin, bootstrap_servers: 'e:9092', mirrors: "
                          "[{source_cluster: west, separator: '-'}]}\n"
                          "    - {name: west, source: admin, bootstrap_servers: 'w:9092'}\n")
    outputs = RunOutputs(root=tmp_path, violations=[kv("kafka.divergent_logs", topic="t", partition=1, broker=2),
                                                    AHEAD], estate=estate)
    plans, errors = plan_run(outputs)
    assert errors == [] and [p["kind"] for p in plans] == ["replica", "group_reset"]
    assert plans[0]["partition_dir"] == "/d2/t-1"
    assert "--bootstrap-server e:9092" in plans[1]["command"] and "west-orders:2" in plans[1]["command"]
