"""Ledger metadata through a bookie's admin HTTP API, against a loopback server paging as ListLedgerService does
(tests/bookkeeper/collect/fake_admin_http.py)."""
from __future__ import annotations

import json
import urllib.parse

import pytest

from audit.collectors.base import CollectionReport, DirSink
from audit.systems.bookkeeper.collect.admin_http import collect_ledger_metadata_http, page_capacity, pages_for
from audit.systems.bookkeeper.collect.collector import BookKeeperCollector, ClusterConfigError, parse_cluster
from audit.systems.bookkeeper.config import AdminHttpConfig, BookKeeperCluster
from audit.config.model import Timeouts
from audit.config.secrets import SecretResolver
from audit.systems.bookkeeper.formats.admin_json import decode_admin_json
from lab.loopback import unused_loopback_port
from tests.bookkeeper.collect.fake_admin_http import PASSWORD_B64, FakeAdminHttp, bean
from lab.bookkeeper.bookie_server import ScriptedBookie


def _collected(root) -> list[int]:
    """Every ledger id in the stored answers, once per occurrence (duplicates would show)."""
    ids = []
    for path in sorted((root / "ledger-metadata-http").glob("*.json")):  # none when the folder does not exist
        data = path.read_bytes()
        assert PASSWORD_B64.encode() not in data, path.name
        ids += [md.ledger_id for md in decode_admin_json(data, path.name)]
    return sorted(ids)


def _params(request: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(request).query))


def test_page_bounds_follow_list_ledger_service():
    assert [page_capacity(p) for p in (1, 2, 3)] == [99, 100, 100]
    assert [pages_for(n) for n in (0, 1, 99, 100, 199, 200, 250)] == [0, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("count, pages", [(0, 0), (1, 1), (99, 1), (100, 2), (250, 3)])
def test_pages_until_the_last_and_collects_every_ledger_once(tmp_path, count, pages):
    with FakeAdminHttp({i: bean(i) for i in range(1, count + 1)}) as server:
        report = collect_ledger_metadata_http(server.url, DirSink(tmp_path), request_timeout_s=5, cluster="bk-a")
    assert report.gaps == []
    assert _collected(tmp_path) == list(range(1, count + 1))
    assert len(server.requests) == 1 + pages  # the list, then one request per page, none per ledger
    assert _params(server.requests[0]) == {}
    assert [_params(r) for r in server.requests[1:]] == [
        {"print_metadata": "true", "decode_meta": "true", "page": str(p)} for p in range(1, pages + 1)]
    sizes = [len(json.loads(p.read_bytes())) for p in sorted((tmp_path / "ledger-metadata-http").glob("*.json"))]
    assert sizes == {0: [], 1: [1], 99: [99], 100: [99, 1], 250: [99, 100, 51]}[count]
    assert report.counts.get("http_ledgers_stored", 0) == count
    assert report.counts["http_ledgers_listed"] == count
    assert report.counts["http_requests"] == 1 + pages


def test_a_page_answered_whole_is_not_asked_again(tmp_path):
    """A server answering every list request with the whole list (as ListLedgerService does without
    print_metadata) is asked for page 1 once: the page is larger than a page, so paging stops there."""
    with FakeAdminHttp({i: bean(i) for i in range(1, 251)}, mode="unpaged") as server:
        report = collect_ledger_metadata_http(server.url, DirSink(tmp_path), request_timeout_s=5)
    lists = [r for r in server.requests if r.startswith("/api/v1/ledger/list")]
    assert len(lists) == 2 and _params(lists[1])["page"] == "1"
    assert len(server.requests) == 2 + 250  # no metadata on the page: each ledger from GetLedgerMetaService
    assert report.counts["http_list_not_paged"] == 1
    assert _collected(tmp_path) == list(range(1, 251))
    assert report.gaps == []


def test_bookie_before_4_11_ignores_decode_meta_and_its_strings_are_never_stored(tmp_path):
    with FakeAdminHttp({i: bean(i) for i in range(1, 121)}, mode="before_4_11") as server:
        report = collect_ledger_metadata_http(server.url, DirSink(tmp_path), request_timeout_s=5)
    assert len(server.requests) == 1 + 2 + 120
    assert report.counts["http_metadata_not_decoded"] == 120
    assert sorted(p.name for p in (tmp_path / "ledger-metadata-http").iterdir()) == sorted(
        f"{i}.json" for i in range(1, 121))
    assert _collected(tmp_path) == list(range(1, 121))


def test_ledger_deleted_while_paging_fails_its_page_and_the_rest_is_asked_one_by_one(tmp_path):
    with FakeAdminHttp({i: bean(i) for i in range(1, 251)}) as server:
        server.vanishing = {150}  # listed, then its metadata read fails inside the page 2 request
        report = collect_ledger_metadata_http(server.url, DirSink(tmp_path), request_timeout_s=5)
    # page 2 -> 500; page 3 then starts at ledger 201 (the list shifted by one) and is the last (50 < 100).
    # Ledgers 100..200 are asked one by one; 150 fails and a second listing shows it deleted.
    one_by_one = [int(_params(r)["ledger_id"]) for r in server.requests if "ledger_id=" in r]
    assert sorted(one_by_one) == list(range(100, 201))
    assert len(server.requests) == 1 + 3 + 101 + 1
    assert _collected(tmp_path) == [i for i in range(1, 251) if i != 150]
    assert report.counts["http_list_pages_failed"] == 1
    assert report.counts["http_ledgers_deleted"] == 1
    assert report.gaps == []


def test_unredactable_page_falls_back_per_ledger_and_only_the_bad_ledger_is_a_gap(tmp_path):
    ledgers = {i: bean(i) for i in range(1, 11)}
    ledgers[4] = {**bean(4), "allEnsembles": "not a map"}
    with FakeAdminHttp(ledgers) as server:
        report = collect_ledger_metadata_http(server.url, DirSink(tmp_path), request_timeout_s=5)
    assert _collected(tmp_path) == [i for i in range(1, 11) if i != 4]
    assert [(_params(g.source)["ledger_id"], g.error.split(",")[0]) for g in report.gaps] == [("4", "not stored")]
    assert report.counts["http_list_pages_undecodable"] == 1


def test_unreachable_admin_endpoint_is_one_gap(tmp_path):
    url = f"http://127.0.0.1:{unused_loopback_port()}"
    report = collect_ledger_metadata_http(url, DirSink(tmp_path), connect_timeout_s=2, request_timeout_s=2)
    assert [(g.source, g.error.split(":")[0]) for g in report.gaps] == [(f"{url}/api/v1/ledger/list", "ledger list")]
    assert "unreachable" in report.gaps[0].error
    assert list(tmp_path.iterdir()) == []


def test_collector_takes_metadata_and_ensembles_from_admin_http(tmp_path):
    with ScriptedBookie({1: range(10), 2: [0, 1]}) as a, ScriptedBookie({1: range(10)}) as b:
        ledgers = {1: bean(1, (a.bookie_id, b.bookie_id)), 2: bean(2, (a.bookie_id,))}
        with FakeAdminHttp(ledgers) as server:
            cluster = BookKeeperCluster(name="bk-a", source="admin_http", admin_http=AdminHttpConfig(url=server.url),
                                        timeouts=Timeouts(connect_s=2.0, request_s=2.0))
            report = BookKeeperCollector().collect(cluster, DirSink(tmp_path), SecretResolver(environ={}))
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert files == {"ledger-metadata-http/list-page-000001.json", "collection.json",
                     f"entries-of-ledger/{a.bookie_id}/1.pb", f"entries-of-ledger/{a.bookie_id}/2.pb",
                     f"entries-of-ledger/{b.bookie_id}/1.pb"}
    assert report.gaps == []
    assert report.counts["ledgers_decoded"] == 2 and report.counts["entries_of_ledger_answered"] == 3
    assert CollectionReport.from_dict(json.loads((tmp_path / "collection.json").read_text())) == report


def test_admin_http_config_errors_name_the_field():
    with pytest.raises(ClusterConfigError, match="field admin_http: expected an admin_http block"):
        parse_cluster({"name": "x", "source": "admin_http"})
    with pytest.raises(ClusterConfigError, match="field admin_http.url: expected an http:// or https:// URL"):
        parse_cluster({"name": "x", "source": "admin_http", "admin_http": {"url": "bookie:8000"}})
    with pytest.raises(ClusterConfigError, match="admin_http.url: expected a URL without a password"):
        parse_cluster({"name": "x", "source": "admin_http", "admin_http": {"url": "http://u:p@bookie:8000"}})
    with pytest.raises(ClusterConfigError, match="admin_http.bogus"):
        parse_cluster({"name": "x", "source": "admin_http", "admin_http": {"url": "http://b:8000", "bogus": 1}})
    s = parse_cluster({"name": "x", "source": "admin_http", "admin_http": {"url": "http://bookie:8000"},
                       "timeouts": {"connect_s": 1, "request_s": 7}})
    assert (s.source, s.admin_url, s.zk_hosts) == ("admin_http", "http://bookie:8000", "")
    assert (s.bookie.connect_timeout_s, s.bookie.request_timeout_s) == (1.0, 7.0)


def test_an_incident_check_asks_for_its_ledgers_only_and_never_pages(tmp_path):
    with FakeAdminHttp({i: bean(i) for i in range(1, 251)}) as server:
        report = collect_ledger_metadata_http(server.url, DirSink(tmp_path), request_timeout_s=5,
                                              wants=lambda i: i in (7, 170))
    assert _collected(tmp_path) == [7, 170]
    assert sorted((_params(r) for r in server.requests[1:]), key=str) == [{"ledger_id": "170"}, {"ledger_id": "7"}]
    assert len(server.requests) == 3 and all("page" not in _params(r) for r in server.requests)
    assert report.counts["http_ledgers_not_in_scope"] == 248 and report.gaps == []
