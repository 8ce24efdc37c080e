"""The plan's reset-cursor request as the broker reads it: the body through a Jackson-like reading of
ResetCursorData (unknown keys ignored), then sent to the lab's loopback admin server, which applies it the way
the broker does; the plan's post-check reads the cursor back from stats-internal."""
from __future__ import annotations

import json

import pytest
import requests

from lab.pulsar.admin_server import serve_pulsar_admin
from lab.pulsar.world import build_world
from audit.systems.pulsar.repair.plan import plan_subscription_repairs, reset_landed
from tests.pulsar.repair.test_repair_plan import row

AS_OF = 1_760_000_000_000
TOPIC = "persistent://lab/geo/orders-backlog"
SUB = "orders-processor"
# ResetCursorData (pulsar-client-admin-api / pulsar-client): Lombok @Data over these fields. Jackson names a
# property by its accessors: `boolean isExcluded` has isExcluded()/setExcluded(), so its property is
# "excluded"; the field itself is protected and not auto-detected.
PROPERTIES = {"ledgerId": 0, "entryId": 0, "partitionIndex": -1, "excluded": False, "batchIndex": -1,
              "properties": None}


def jackson_reset_cursor_data(body: dict) -> dict:
    """What the broker's ObjectMapper (FAIL_ON_UNKNOWN_PROPERTIES false, ObjectMapperFactory) makes of a body:
    the known properties over their defaults; anything else is dropped without an error."""
    return {**PROPERTIES, **{k: v for k, v in body.items() if k in PROPERTIES}}


def _plan(exact: str, admin: str, current: str) -> dict:
    (plan,) = plan_subscription_repairs(
        [row(topic=TOPIC, sub=SUB, source="east", target="west", target_mdp=current, exact=exact, acks=(),
             redelivered=1)], cluster_admin_urls={"west": admin})
    return plan


def _cursor(url: str) -> tuple[str, str, list[tuple[int, int]]]:
    si = requests.get(f"{url}/admin/v2/persistent/lab/geo/orders-backlog/internalStats", timeout=5).json()
    c = si["cursors"][SUB]
    return c["markDeletePosition"], c["individuallyDeletedMessages"], [(l["ledgerId"], l["entries"])
                                                                       for l in si["ledgers"]]


@pytest.fixture(scope="module")
def world():
    return build_world({"seed": 7}, AS_OF)   # its own world: these tests move a cursor


def test_the_plans_body_deserializes_with_excluded_true():
    (plan,) = plan_subscription_repairs([row()])
    body = plan["steps"][0]["http"]["body"]
    assert jackson_reset_cursor_data(body) == {**PROPERTIES, "ledgerId": 7, "entryId": 4, "excluded": True}
    # the old spelling is an unknown property: silently dropped, the reset lands AT L:E instead of after it
    assert jackson_reset_cursor_data({"ledgerId": 7, "entryId": 4, "isExcluded": True})["excluded"] is False


def _ledgers(world) -> list[tuple[int, int]]:
    topic = world.topic("west", TOPIC)
    return [(led.ledger_id, led.count) for led in topic.ml.live_ledgers()]


@pytest.mark.parametrize("pick", ["last entry of a closed ledger", "middle of a ledger", "L:-1"])
def test_the_plans_request_lands_where_the_plan_says(world, pick):
    (l1, n1), (l2, n2) = _ledgers(world)[1:3]
    exact = {"last entry of a closed ledger": f"{l1}:{n1 - 1}", "middle of a ledger": f"{l2}:10",
             "L:-1": f"{l2}:-1"}[pick]
    with serve_pulsar_admin(world, "west") as url:
        current, _, _ = _cursor(url)
        reset = _plan(exact, url, current)["steps"][0]
        r = requests.post(reset["http"]["url"], data=json.dumps(reset["http"]["body"]),
                          headers={"Content-Type": "application/json"}, timeout=5)
        assert r.status_code == 204
        mdp, acked, ledgers = _cursor(url)
    assert acked == "[]" and reset["post_check"]["mark_delete_position"] == exact
    assert reset_landed(exact, mdp, ledgers)
    # L:-1 is stored as the previous ledger's last entry; the literal comparison would call it a failure
    assert (mdp == exact) == (pick != "L:-1")
    if pick == "L:-1":
        assert mdp == f"{l1}:{n1 - 1}"


def test_an_isExcluded_body_lands_one_entry_early_and_the_post_check_says_so(world):
    (l1, n1) = _ledgers(world)[1]
    exact = f"{l1}:{n1 - 1}"
    with serve_pulsar_admin(world, "west") as url:
        reset = _plan(exact, url, _cursor(url)[0])["steps"][0]
        old_style = {k: v for k, v in reset["http"]["body"].items() if k != "excluded"} | {"isExcluded": True}
        assert requests.post(reset["http"]["url"], json=old_style, timeout=5).status_code == 204
        mdp, _, ledgers = _cursor(url)
    assert mdp == f"{l1}:{n1 - 2}" and not reset_landed(exact, mdp, ledgers)


def test_reset_landed_rules():
    ledgers = [(5, 10), (6, 0), (8, 3)]
    assert reset_landed("8:-1", "5:9", ledgers)          # the empty ledger 6 is skipped, as getPreviousPosition does
    assert reset_landed("8:-1", "8:-1", ledgers) and not reset_landed("8:-1", "8:0", ledgers)
    assert reset_landed("5:-1", "5:-1", ledgers) and not reset_landed("5:4", "5:3", ledgers)
    with pytest.raises(ValueError):
        reset_landed("5", "5:3", ledgers)
