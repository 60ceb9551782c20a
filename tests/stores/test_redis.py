"""What is specific to the Redis store: durability settings, races between
clients, fencing across store instances, script atomicity and key prefixes.

The shared behaviour is proven by the contract suite (test_contract.py). These
tests need a Redis server: SAVEGAME_TEST_REDIS (default redis://127.0.0.1:6379/0);
they skip without one, unless SAVEGAME_REQUIRE_SERVICES=1 (CI), where they fail
(tests/services.py).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
import redis

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseHeldError,
    LeaseLostError,
    NotFoundError,
)
from savegame.model import Lease, RunStatus, utcnow
from savegame.redaction import redact_url
from savegame.stores import open_store
from savegame.stores.redis import RedisStore, durability, parse_url
from savegame.stores.redis import _store as redis_store
from savegame.stores.redis._layout import LAYOUT
from savegame.testing.builders import OTHER_OWNER, OWNER, make_effect, make_run, next_record
from tests import services

TTL = 30.0
URL = services.REDIS_URL

Opener = Callable[..., RedisStore]


@pytest.fixture
def raw() -> Iterator[Any]:
    """A plain client on the test server, to look at keys behind the store's back."""
    client = services.redis_client()
    yield client
    client.close()


@pytest.fixture
def open_scratch(raw: Any) -> Iterator[Opener]:
    """Open stores on fresh prefixes (or a given one); every key they made is deleted afterwards."""
    opened: list[RedisStore] = []

    def opener(prefix: str | None = None) -> RedisStore:
        prefix = prefix or f"sgtest-{uuid.uuid4().hex}"
        store = RedisStore.from_url(services.redis_url(prefix))
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.delete_all()
        store.close()


def _keys(raw: Any, store: RedisStore) -> dict[bytes, bytes]:
    """Every key under the store's prefix with its serialized value."""
    return {key: raw.dump(key) for key in raw.scan_iter(match="{" + store.prefix + "}:*")}


# -- durability -----------------------------------------------------------------------
def test_opening_warns_once_when_the_server_cannot_promise_durability(
    raw: Any, open_scratch: Opener, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    persistent, problem = durability(raw)
    if persistent:
        pytest.skip("the test server runs with appendonly yes and a safe appendfsync")
    monkeypatch.setattr(redis_store, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="savegame.stores.redis"):
        store = open_scratch()
        open_scratch()  # the process was told about this server already
    [said] = [r for r in caplog.records if r.name == "savegame.stores.redis"]
    assert said.levelno == logging.WARNING
    assert problem is not None and problem in said.getMessage()
    assert "may lose saved checkpoints" in said.getMessage()
    assert "appendonly yes and appendfsync always" in said.getMessage()
    assert (store.capabilities.persistent, store.capabilities.multi_process) == (False, True)


class _Config:
    def __init__(self, config: dict[str, str] | None) -> None:
        self.config = config

    def config_get(self, pattern: str) -> dict[str, str]:
        if self.config is None:
            raise redis.ResponseError("unknown command 'CONFIG'")
        return self.config


@pytest.mark.parametrize(
    ("config", "persistent", "problem"),
    [
        ({"appendonly": "yes", "appendfsync": "always"}, True, None),
        ({"appendonly": "yes", "appendfsync": "everysec"}, True, None),
        ({"appendonly": "yes", "appendfsync": "no"}, False, "appendfsync is no"),
        ({"appendonly": "no", "appendfsync": "always"}, False, "appendonly is no"),
        (None, False, "cannot be read"),
    ],
)
def test_durability_reads_the_aof_settings(
    config: dict[str, str] | None, persistent: bool, problem: str | None
) -> None:
    found, text = durability(_Config(config))  # type: ignore[arg-type]
    assert found is persistent
    assert (text is None) if problem is None else (text is not None and problem in text)


# -- leases across clients --------------------------------------------------------------
def _race(stores: list[RedisStore], run_id: str) -> list[Lease | LeaseHeldError]:
    """Each store (its own client and connections) tries to take the run at the same moment."""
    barrier = threading.Barrier(len(stores))
    outcome: list[Lease | LeaseHeldError] = []

    def contend(store: RedisStore, owner: str) -> None:
        barrier.wait()
        try:
            outcome.append(store.acquire_lease(run_id, owner, TTL))
        except LeaseHeldError as exc:
            outcome.append(exc)

    threads = [
        threading.Thread(target=contend, args=(store, f"host:{i}:1"))
        for i, store in enumerate(stores)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def test_two_clients_racing_for_a_lease_have_exactly_one_winner(open_scratch: Opener) -> None:
    a = open_scratch()
    b = open_scratch(a.prefix)
    for _ in range(20):
        run, first = make_run()
        a.create_run(run, first, owner=OWNER, ttl=0.0)  # expired at once: up for grabs
        outcome = _race([a, b], run.run_id)
        leases = [o for o in outcome if isinstance(o, Lease)]
        assert (len(leases), len(outcome)) == (1, 2)
        assert leases[0].token == 2
        assert b.get_run(run.run_id).lease == leases[0]


def test_stale_writer_is_rejected_after_a_takeover_by_another_instance(
    open_scratch: Opener,
) -> None:
    mine = open_scratch()
    theirs = open_scratch(mine.prefix)
    run, first = make_run()
    old = mine.create_run(run, first, owner=OWNER, ttl=0.0)
    taken = theirs.acquire_lease(run.run_id, OTHER_OWNER, TTL)
    with pytest.raises(LeaseLostError):
        mine.put_checkpoint(next_record(first), lease_token=old.token)
    with pytest.raises(LeaseLostError):
        mine.record_intent(make_effect(run.run_id), lease_token=old.token)
    with pytest.raises(LeaseLostError):
        mine.renew_lease(run.run_id, old.token, TTL)
    mine.release_lease(run.run_id, old.token)  # stale: a no-op
    second = next_record(first)
    theirs.put_checkpoint(second, lease_token=taken.token)
    assert mine.latest_checkpoint(run.run_id) == second
    assert mine.get_run(run.run_id).lease == taken


def test_lease_expiry_is_server_time(raw: Any, open_scratch: Opener) -> None:
    store = open_scratch()
    seconds, micros = raw.time()
    lease = store.create_run(*make_run(), owner=OWNER, ttl=TTL)
    assert 0 <= lease.expires_at - (seconds + micros / 1e6 + TTL) < 5


# -- atomicity --------------------------------------------------------------------------
def test_a_stale_put_leaves_no_partial_keys(raw: Any, open_scratch: Opener) -> None:
    store = open_scratch()
    run, first = make_run()
    old = store.create_run(run, first, owner=OWNER, ttl=0.0)
    store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
    before = _keys(raw, store)
    stale = next_record(first)
    effect = make_effect(run.run_id, "read-1")
    with pytest.raises(LeaseLostError):
        store.put_checkpoint(
            stale, lease_token=old.token, effects=[effect], blobs={"blake2b:abc": b"blob"}
        )
    # Byte for byte: no checkpoint hash, history entry, journal entry, blob or reference.
    assert _keys(raw, store) == before
    with pytest.raises(NotFoundError):
        store.get_checkpoint(stale.checkpoint_id)
    assert store.missing_blobs(["blake2b:abc"]) == {"blake2b:abc"}
    assert store.list_effects(run.run_id) == []


def test_a_duplicate_checkpoint_leaves_no_partial_keys(raw: Any, open_scratch: Opener) -> None:
    store = open_scratch()
    run, first = make_run()
    lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
    before = _keys(raw, store)
    clash = next_record(first, checkpoint_id=first.checkpoint_id)
    with pytest.raises(ConflictError, match="exists already"):
        store.put_checkpoint(
            clash, lease_token=lease.token, effects=[make_effect(run.run_id)], blobs={"d": b"x"}
        )
    assert _keys(raw, store) == before


def test_a_missing_blob_leaves_no_partial_keys(raw: Any, open_scratch: Opener) -> None:
    store = open_scratch()
    run, first = make_run()
    lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
    before = _keys(raw, store)
    bad = next_record(first, blobs=("given", "absent"))
    with pytest.raises(ConflictError, match="absent"):
        store.put_checkpoint(
            bad, lease_token=lease.token, effects=[make_effect(run.run_id)], blobs={"given": b"x"}
        )
    fork, fork_first = make_run()
    fork_first = replace(fork_first, header=replace(fork_first.header, blobs=("absent",)))
    with pytest.raises(ConflictError, match="absent"):
        store.create_run(fork, fork_first, owner=None, ttl=TTL, blobs={"given": b"x"})
    assert _keys(raw, store) == before


# -- claims ---------------------------------------------------------------------------
def test_a_claim_walks_past_pages_of_leased_runs(open_scratch: Opener) -> None:
    """The claim script merges the queued and running indexes page by page (100 at a time)."""
    store = open_scratch()
    base = utcnow() - timedelta(hours=1)

    def create(i: int, status: RunStatus, owner: str | None) -> str:
        run, first = make_run()
        first = replace(first, header=replace(first.header, status=status))
        at = base + timedelta(milliseconds=i)
        store.create_run(replace(run, created_at=at), first, owner=owner, ttl=TTL)
        return run.run_id

    # 250 live runs in both indexes, interleaved, older than anything claimable.
    for i in range(250):
        create(i, RunStatus.RUNNING if i % 3 else RunStatus.QUEUED, OWNER)
    newest = create(1000, RunStatus.QUEUED, None)
    older = create(500, RunStatus.RUNNING, None)
    claimed = [store.claim_run(OTHER_OWNER, TTL) for _ in range(3)]
    assert [c.run_id if c else None for c in claimed] == [older, newest, None]


def test_claim_expiry_is_server_time(raw: Any, open_scratch: Opener) -> None:
    store = open_scratch()
    store.create_run(*make_run(), owner=None, ttl=TTL)
    seconds, micros = raw.time()
    lease = store.claim_run(OWNER, TTL)
    assert lease is not None
    assert 0 <= lease.expires_at - (seconds + micros / 1e6 + TTL) < 5


# -- prefixes and URLs -----------------------------------------------------------------
def test_prefixes_isolate_stores_on_one_database(raw: Any, open_scratch: Opener) -> None:
    a, b = open_scratch(), open_scratch()
    run, first = make_run()
    lease = a.create_run(run, first, owner=OWNER, ttl=TTL)
    a.put_checkpoint(next_record(first), lease_token=lease.token, blobs={"d": b"x"})
    with pytest.raises(NotFoundError):
        b.get_run(run.run_id)
    assert (b.list_runs(), b.list_threads(), b.thread_head(run.thread_id)) == ([], [], None)
    assert (b.stats().runs, b.stats().checkpoints, b.stats().blobs) == (0, 0, 0)
    assert b.missing_blobs(["d"]) == {"d"}
    assert all(k.startswith(b"{" + a.prefix.encode() + b"}:") for k in _keys(raw, a))
    assert b.delete_all() == 1  # its layout key only
    assert a.get_run(run.run_id).head_checkpoint_id is not None
    assert a.delete_all() > 1
    assert _keys(raw, a) == {}


def test_urls_carry_the_prefix_and_never_the_password() -> None:
    assert parse_url("redis://h:1/2") == ("redis://h:1/2", "savegame")
    assert parse_url("rediss://h/0?prefix=app.v1&socket_timeout=5") == (
        "rediss://h/0?socket_timeout=5",
        "app.v1",
    )
    for bad in ("redis://h/0?prefix=", "redis://h/0?prefix=a:b", "redis://h/0?prefix=%7Bx%7D"):
        with pytest.raises(ConfigurationError):
            parse_url(bad)
    with pytest.raises(ConfigurationError):
        parse_url("http://h/0")


def test_open_store_opens_redis_urls(open_scratch: Opener) -> None:
    store = open_scratch()
    again = open_store(store.url)
    try:
        assert isinstance(again, RedisStore)
        assert (again.url, again.prefix) == (store.url, store.prefix)
    finally:
        again.close()
    client = redis.Redis.from_url(URL)
    try:
        built = RedisStore(client, prefix=store.prefix)
        assert built.url.endswith(f"/0?prefix={store.prefix}")
        built.close()  # not its client: still usable
        assert client.ping()
    finally:
        client.close()


def test_url_drops_the_password() -> None:
    url = "redis://user:s3cret@127.0.0.1:1/0?prefix=p"
    assert redact_url(url) == "redis://user@127.0.0.1:1/0?prefix=p"
    assert redact_url("redis://:s3cret@h/0?password=s3cret") == "redis://h/0"


def test_a_layout_1_journal_is_indexed_when_a_store_opens_it(
    raw: Any, open_scratch: Opener
) -> None:
    """Layout 2 adds each run's request-id index (``fxi``); keys written by layout 1 (the
    same keys without it) are indexed on open, so a prefix lists entries journaled before."""
    store = open_scratch()
    runs = []
    for _ in range(3):
        run, first = make_run()
        lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
        for i in range(1200):  # more than one ZADD slice of the migration
            store.record_intent(make_effect(run.run_id, f"c{i % 3}|t|{i}"), lease_token=lease.token)
        store.put_checkpoint(
            next_record(first), lease_token=lease.token, effects=[make_effect(run.run_id, "c1|v|0")]
        )
        runs.append(run.run_id)
    p = "{" + store.prefix + "}:"
    expected = {r: store.list_effects(r, request_prefix="c1|") for r in runs}
    assert all(len(found) == 401 for found in expected.values())
    # What layout 1 left: no index keys, and its number.
    raw.delete(*[p + "fxi:" + r for r in runs])
    raw.set(p + "layout", 1)
    assert store.list_effects(runs[0], request_prefix="c1|") == []
    reopened = open_scratch(store.prefix)
    assert int(raw.get(p + "layout")) == LAYOUT  # 3: waiting runs' keys need nothing
    for r in runs:
        assert reopened.list_effects(r, request_prefix="c1|") == expected[r]
    assert raw.zcard(p + "fxi:" + runs[0]) == 1201
    open_scratch(store.prefix)  # the layout of this code already: nothing to do
    assert raw.zcard(p + "fxi:" + runs[0]) == 1201


def test_keys_from_a_newer_layout_are_refused(raw: Any, open_scratch: Opener) -> None:
    store = open_scratch()
    raw.set("{" + store.prefix + "}:layout", 99)
    with pytest.raises(ConfigurationError, match="layout 99"):
        open_scratch(store.prefix)
