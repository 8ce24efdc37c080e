"""S3Store retries transient server errors (real 503s over HTTP) and gives up with a clear error."""
import pytest

from audit.store import StoreError
from audit.store.s3 import S3Store
from tests.s3fixture import STORE_CREDENTIALS
from tests.store.flaky_proxy import FlakyProxy



@pytest.fixture
def proxy(s3_endpoint):
    p = FlakyProxy(s3_endpoint).start()
    yield p
    p.stop()


def test_put_and_get_survive_transient_503s(proxy, s3_bucket):
    store = S3Store(s3_bucket, "p", endpoint_url=proxy.url, credentials=STORE_CREDENTIALS, max_attempts=4)
    proxy.fail_next(2)
    store.put("k.json", b'{"a": 1}')
    puts = [status for method, path, status in proxy.log if method == "PUT" and path.endswith("/p/k.json")]
    assert puts == [503, 503, 200]

    proxy.log.clear()
    proxy.fail_next(1, status=500)
    assert store.get("k.json") == b'{"a": 1}'
    assert [status for _, _, status in proxy.log] == [500, 200]


def test_listing_retries_per_page(proxy, s3_bucket):
    store = S3Store(s3_bucket, "", endpoint_url=proxy.url, credentials=STORE_CREDENTIALS, max_attempts=3)
    for i in range(3):
        store.put(f"l/{i}", b"")
    proxy.log.clear()
    proxy.fail_next(1)
    assert list(store.list("l/")) == ["l/0", "l/1", "l/2"]
    assert [status for _, _, status in proxy.log] == [503, 200]


def test_gives_up_after_max_attempts_naming_the_key(proxy, s3_bucket):
    store = S3Store(s3_bucket, "p", endpoint_url=proxy.url, credentials=STORE_CREDENTIALS, max_attempts=2)
    proxy.fail_next(10)
    with pytest.raises(StoreError) as info:
        store.put("doomed.bin", b"x")
    assert info.value.key == "doomed.bin"
    assert "SlowDown" in str(info.value) or "503" in str(info.value)
    assert [status for _, _, status in proxy.log] == [503, 503]  # max_attempts counts the first try
