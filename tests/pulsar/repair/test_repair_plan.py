"""Pulsar failover repair plans from hand-made metrics/pulsar_failover rows: which rows get a plan, the exact
reset call and command, the acknowledgement chunks, warnings, stable ids, and bad rows named by row + field."""
import copy
import json

import pytest

from audit.systems.pulsar.repair.plan import plan_subscription_repairs

TOPIC = "persistent://acme/orders/created-partition-0"
ADMIN = {"west": "https://west-broker:8443"}


def row(target_mdp="7:10", exact="7:4", acks=("7:6", "7:9"), count=None, redelivered=3, skipped=0, lost=0,
        sub="billing", topic=TOPIC, source="east", target="west", complete=True, **extra):
    out = {"run_id": "r1", "topic": topic, "subscription": sub, "source_cluster": source, "target_cluster": target,
           "replicated": True, "source_mdp": "5:4", "target_mdp": target_mdp, "expected_target_mdp": "7:2",
           "exact_target_mdp": exact, "window_from": "5:0", "window_to": "5:20", "compared": 20,
           "only_on_source": 0, "only_on_target": 0, "redelivered": redelivered, "skipped": skipped, "lost": lost,
           "redelivered_ranges": "[]", "skipped_ranges": "[]", "to_acknowledge": json.dumps(list(acks)),
           "to_acknowledge_count": len(acks) if count is None else count, "complete": complete}
    out.update(extra)
    return out


# (case, row, expected (from, to, direction, warnings mention), positions listed, remaining)
CASES = [
    ("target ahead: backward reset un-acks", row(target_mdp="7:10", exact="7:4", skipped=2, lost=1),
     ("7:10", "7:4", "backward"), ["BACKWARD", "2 message(s) the target had skipped will be delivered (1 of them"],
     ["7:6", "7:9"], 0),
    ("target behind: forward reset", row(target_mdp="7:1", exact="7:4", acks=()),
     ("7:1", "7:4", "forward"), [], [], 0),
    ("same MDP but acks differ: reset in place + acks", row(target_mdp="7:4", exact="7:4", redelivered=2),
     ("7:4", "7:4", "none"), [], ["7:6", "7:9"], 0),
    ("fresh cursor position L:-1", row(target_mdp="9:3", exact="9:-1", acks=("9:0",), skipped=1),
     ("9:3", "9:-1", "backward"), ["BACKWARD", "1 message(s) the target had skipped"], ["9:0"], 0),
    ("truncated list says how many remain", row(acks=("7:6", "7:9"), count=12_345),
     ("7:10", "7:4", "backward"), ["BACKWARD"], ["7:6", "7:9"], 12_343),
    ("incomplete window is flagged", row(complete=False), ("7:10", "7:4", "backward"),
     ["BACKWARD", "unread entries"], ["7:6", "7:9"], 0),
]


@pytest.mark.parametrize("case, r, reset, warns, positions, remaining", CASES, ids=[c[0] for c in CASES])
def test_plan_shape(case, r, reset, warns, positions, remaining):
    (plan,) = plan_subscription_repairs([r], cluster_admin_urls=ADMIN)
    assert (plan["status"], plan["dry_run"], plan["system"]) == ("planned", True, "pulsar")
    assert (plan["cluster"], plan["source_cluster"], plan["topic"], plan["subscription"]) == (
        "west", "east", TOPIC, "billing")
    assert plan["preconditions"]["target_mark_delete_position"] == r["target_mdp"]
    assert plan["preconditions"]["to_acknowledge_count"] == r["to_acknowledge_count"]
    reset_step, ack_step = plan["steps"]
    assert (reset_step["from"], reset_step["to"], reset_step["direction"]) == reset
    assert len(plan["warnings"]) == len(warns)
    for w, text in zip(plan["warnings"], warns):
        assert text in w
    listed = [p for c in ack_step["chunks"] for p in c["positions"]]
    assert listed == positions and ack_step["positions_listed"] == len(positions)
    assert ack_step["remaining"] == remaining
    assert any(f"{remaining} remain" in n for n in ack_step["notes"]) == bool(remaining)


def test_reset_call_and_command_are_exact():
    (plan,) = plan_subscription_repairs([row(sub="my sub/1")], cluster_admin_urls=ADMIN)
    reset = plan["steps"][0]
    assert reset["http"] == {
        "method": "POST",
        "url": "https://west-broker:8443/admin/v2/persistent/acme/orders/created-partition-0"
               "/subscription/my%20sub%2F1/resetcursor",
        "body": {"ledgerId": 7, "entryId": 4, "partitionIndex": -1, "excluded": True, "batchIndex": -1}}
    assert reset["command"] == ("bin/pulsar-admin --admin-url https://west-broker:8443 topics reset-cursor "
                                f"{TOPIC} -s 'my sub/1' -m 7:4 -e")
    assert plan["preconditions"]["verify"] == (f"bin/pulsar-admin --admin-url https://west-broker:8443 topics "
                                               f"stats-internal {TOPIC}")
    script = plan["steps"][1]["script"]
    assert f"client.subscribe({TOPIC!r}, 'my sub/1', consumer_type=pulsar.ConsumerType.Shared)" in script
    assert "consumer.acknowledge(pulsar.MessageId(-1, ledger_id, entry_id, -1))" in script
    assert "approval flow" in plan["notes"][0]


def test_unknown_admin_url_is_left_for_the_operator():
    (plan,) = plan_subscription_repairs([row()])
    assert plan["admin_url"] is None
    assert plan["steps"][0]["http"]["url"].startswith("<admin url of west>/admin/v2/persistent/acme/")
    assert plan["steps"][0]["command"].startswith("bin/pulsar-admin topics reset-cursor ")


def test_chunks_hold_at_most_chunk_size_positions_in_order():
    acks = [f"8:{e}" for e in (5, 1, 3, 2, 4)]
    (plan,) = plan_subscription_repairs([row(exact="7:4", acks=acks)], chunk_size=2)
    chunks = plan["steps"][1]["chunks"]
    assert [(c["index"], c["first"], c["last"], c["count"]) for c in chunks] == [
        (0, "8:1", "8:2", 2), (1, "8:3", "8:4", 2), (2, "8:5", "8:5", 1)]


def test_rows_in_step_get_no_plan_and_plans_are_sorted():
    rows = [row(sub="z", target="west"), row(target_mdp="7:4", redelivered=0, skipped=0, sub="in-step"),
            row(sub="a", target="west", source="south"), row(sub="a", target="east", source="west")]
    plans = plan_subscription_repairs(rows)
    assert [(p["cluster"], p["subscription"], p["source_cluster"]) for p in plans] == [
        ("east", "a", "west"), ("west", "a", "south"), ("west", "z", "east")]


def test_plan_id_is_stable_and_depends_on_content():
    a = plan_subscription_repairs([row()], cluster_admin_urls=ADMIN)[0]
    b = plan_subscription_repairs([copy.deepcopy(row())], cluster_admin_urls=ADMIN)[0]
    c = plan_subscription_repairs([row(exact="7:5")], cluster_admin_urls=ADMIN)[0]
    assert a["plan_id"] == b["plan_id"] and len(a["plan_id"]) == 64
    assert a["plan_id"] != c["plan_id"]


BAD = [
    ("missing target_mdp", {"target_mdp": None}, "target_mdp"),
    ("malformed exact position", {"exact_target_mdp": "7-4"}, "exact_target_mdp"),
    ("client message id is not a broker position", {"source_mdp": "5:4:0"}, "source_mdp"),
    ("count is a string", {"skipped": "3"}, "skipped"),
    ("negative count", {"lost": -1}, "lost"),
    ("bool is not a count", {"redelivered": True}, "redelivered"),
    ("to_acknowledge not JSON", {"to_acknowledge": "7:6,7:9"}, "to_acknowledge"),
    ("to_acknowledge item malformed", {"to_acknowledge": '["7:6", "x"]'}, "to_acknowledge"),
    ("ack at or below the new MDP", {"to_acknowledge": '["7:4"]', "to_acknowledge_count": 1}, "to_acknowledge"),
    ("more listed than counted", {"to_acknowledge_count": 1}, "to_acknowledge_count"),
    ("non-persistent topic", {"topic": "non-persistent://acme/orders/x"}, "topic"),
    ("missing subscription", {"subscription": ""}, "subscription"),
    # a key (origin, producer, sequence id) repeats in a window: which copy is which message is unknown
    ("ambiguous pairing", {"pairing_ambiguous": True}, "pairing_ambiguous"),
]


@pytest.mark.parametrize("case, patch, field", BAD, ids=[b[0] for b in BAD])
def test_bad_row_is_named_and_others_still_planned(case, patch, field):
    bad = {**row(sub="broken"), **patch}
    out = plan_subscription_repairs([row(sub="ok"), bad])
    assert [o["status"] for o in out] == ["planned", "error"]
    err = out[1]
    assert (err["row"], err["field"]) == (1, field)
    assert err["error"].startswith("failover[1] ")
    assert f": {field}: expected" in err["error"]
    if field not in ("topic", "subscription"):
        assert f"{TOPIC} sub=broken east->west" in err["error"]


def test_not_a_mapping_row():
    (err,) = plan_subscription_repairs(["nope"])
    assert (err["status"], err["row"], err["field"]) == ("error", 0, "(row)")
