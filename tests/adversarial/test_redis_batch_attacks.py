"""Attacks on RedisStore.put_checkpoints: the batch's scripts in one MULTI/EXEC.

The BatchContract (savegame.testing) holds the batch's plain promises; these push on
what it does not: a batch must decide each put exactly as put_checkpoint alone would,
in the batch's order (a differential property against one put at a time), keys edited
behind the store's back, the server dropping the connection, and a large batch.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from savegame.errors import CorruptRecordError
from savegame.ids import new_id
from savegame.model import CheckpointRecord, EffectKind, Lease
from savegame.stores import open_store
from savegame.stores.base import BatchStore, Put, PutResult
from savegame.stores.redis import RedisStore
from savegame.testing.builders import OTHER_OWNER, OWNER, make_effect, make_run, next_record
from tests import services
from tests.adversarial.batch_plans import Plan, build_puts, one_at_a_time, start_runs

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the test Redis has no AOF


@dataclass
class Opened:
    store: RedisStore
    client: Any
    prefix: str

    def key(self, kind: str, ident: str) -> str:
        return f"{{{self.prefix}}}:{kind}:{ident}"

    def keys(self) -> set[bytes]:
        return set(self.client.scan_iter(match="{" + self.prefix + "}:*", count=500))


@pytest.fixture
def redis_store() -> Iterator[Opened]:
    with services.redis_prefix() as prefix:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(services.redis_url(prefix))
        assert isinstance(store, RedisStore)
        client = services.redis_client()
        try:
            yield Opened(store, client, prefix)
        finally:
            client.close()
            store.close()


def _start(store: BatchStore, run_id: str | None = None) -> tuple[CheckpointRecord, Lease]:
    run, first = make_run(run_id=run_id)
    return first, store.create_run(run, first, owner=OWNER, ttl=60.0)


def test_two_puts_of_one_run_are_applied_in_the_batch_s_order(redis_store: Opened) -> None:
    store = redis_store.store
    first, lease = _start(store)
    a = next_record(first)
    b = next_record(a)
    got = store.put_checkpoints([Put(a, lease.token), Put(b, lease.token)])
    assert [type(x) for x in got] == [PutResult, PutResult]
    run = store.get_run(first.run_id)
    assert run.head_checkpoint_id == b.checkpoint_id
    assert run.step == b.header.step
    # The same checkpoint twice in one batch: the second is the duplicate, as alone.
    c = next_record(b)
    got = store.put_checkpoints([Put(c, lease.token), Put(c, lease.token)])
    assert isinstance(got[0], PutResult)
    assert isinstance(got[1], Exception)
    assert store.get_run(first.run_id).head_checkpoint_id == c.checkpoint_id


def test_a_lease_taken_over_mid_batch_fences_the_puts_after_it(redis_store: Opened) -> None:
    # Puts of one run before and after its takeover in another process: the batch is
    # built before the takeover, so both carry the old token and both are refused.
    store = redis_store.store
    first, lease = _start(store)
    other_first, other_lease = _start(store)
    store.acquire_lease(first.run_id, OTHER_OWNER, 60.0, takeover_token=lease.token)
    a = next_record(first)
    got = store.put_checkpoints(
        [
            Put(a, lease.token),
            Put(next_record(other_first), other_lease.token),
            Put(next_record(a), lease.token),
        ]
    )
    assert [type(x).__name__ for x in got] == ["LeaseLostError", "PutResult", "LeaseLostError"]
    assert store.get_run(first.run_id).head_checkpoint_id == first.checkpoint_id


# -- the batch decides each put as put_checkpoint alone would ---------------------------
_KINDS = ("ok", "stale", "no_run", "bad_args", "dup", "second")


def _outcome(x: PutResult | Exception) -> str:
    return "written" if isinstance(x, PutResult) else type(x).__name__


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    plans=st.lists(
        st.builds(Plan, st.sampled_from(_KINDS), st.integers(0, 2)), min_size=1, max_size=12
    )
)
def test_a_batch_decides_each_put_as_one_put_at_a_time(plans: list[Plan]) -> None:
    """Differential: the same puts against two fresh prefixes, one batch vs one at a time;
    every outcome, every run's head and step, and the set of keys written must match."""
    run_ids = [new_id() for _ in range(3)]
    with services.redis_prefix() as p1, services.redis_prefix() as p2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            batched = open_store(services.redis_url(p1))
            alone = open_store(services.redis_url(p2))
        client = services.redis_client()
        try:
            assert isinstance(batched, RedisStore) and isinstance(alone, RedisStore)
            heads, tokens = start_runs([batched, alone], run_ids)
            puts = build_puts(plans, run_ids, heads, tokens)
            got = [_outcome(x) for x in batched.put_checkpoints(puts)]
            want = [_outcome(x) for x in one_at_a_time(alone, puts)]
            assert got == want
            for rid in run_ids:
                x, y = batched.get_run(rid), alone.get_run(rid)
                assert (x.head_checkpoint_id, x.step, x.status) == (
                    y.head_checkpoint_id,
                    y.step,
                    y.status,
                )

            def names(prefix: str) -> set[bytes]:
                cut = len(prefix) + 2
                return {k[cut:] for k in client.scan_iter(match="{" + prefix + "}:*", count=500)}

            assert names(p1) == names(p2)
        finally:
            client.close()
            batched.close()
            alone.close()


# -- keys edited behind the store's back ----------------------------------------------------
def test_a_run_key_of_the_wrong_type_fails_that_put_alone(redis_store: Opened) -> None:
    store, client = redis_store.store, redis_store.client
    bad_first, bad_lease = _start(store)
    ok_first, ok_lease = _start(store)
    client.delete(redis_store.key("run", bad_first.run_id))
    client.set(redis_store.key("run", bad_first.run_id), b"not a hash")
    fine = next_record(ok_first)
    got = store.put_checkpoints(
        [Put(next_record(bad_first), bad_lease.token), Put(fine, ok_lease.token)]
    )
    assert isinstance(got[0], Exception) and not isinstance(got[0], PutResult)
    assert isinstance(got[1], PutResult)
    assert store.get_run(ok_first.run_id).head_checkpoint_id == fine.checkpoint_id


def test_a_script_error_after_the_checks_leaves_no_checkpoint_behind(
    redis_store: Opened,
) -> None:
    """The scripts promise to check everything before the first write. A run's index of
    checkpoints edited into a string makes the script fail after the checks: the put
    must fail alone, and leave no checkpoint (a retry with the same id must not meet a
    half-written one and be called a conflict)."""
    store, client = redis_store.store, redis_store.client
    bad_first, bad_lease = _start(store)
    ok_first, ok_lease = _start(store)
    client.delete(redis_store.key("cps", bad_first.run_id))
    client.set(redis_store.key("cps", bad_first.run_id), b"edited")
    refused = next_record(bad_first)
    fine = next_record(ok_first)
    got = store.put_checkpoints([Put(refused, bad_lease.token), Put(fine, ok_lease.token)])
    assert not isinstance(got[0], PutResult)
    assert isinstance(got[1], PutResult)
    run = store.get_run(bad_first.run_id)
    assert run.head_checkpoint_id == bad_first.checkpoint_id
    assert client.exists(redis_store.key("cp", refused.checkpoint_id)) == 0
    assert isinstance(got[0], CorruptRecordError)
    # Put right, the same put goes through: nothing half-written stands in its way.
    client.delete(redis_store.key("cps", bad_first.run_id))
    store.put_checkpoint(refused, lease_token=bad_lease.token)
    assert store.get_run(bad_first.run_id).head_checkpoint_id == refused.checkpoint_id


def test_an_edited_key_of_an_event_s_target_run_refuses_before_writing(
    redis_store: Opened,
) -> None:
    # A child's end delivered to its parent: the parent's journal index edited into a
    # string must refuse the child's put before its checkpoint is stored.
    store, client = redis_store.store, redis_store.client
    child_first, child_lease = _start(store)
    parent_first, _ = _start(store)
    client.set(redis_store.key("fxi", parent_first.run_id), b"edited")
    event = make_effect(parent_first.run_id, "child-done", kind=EffectKind.EVENT, name="topic")
    refused = next_record(child_first)
    other_first, other_lease = _start(store)
    got = store.put_checkpoints(
        [
            Put(refused, child_lease.token, events=[event]),
            Put(next_record(other_first), other_lease.token),
        ]
    )
    assert isinstance(got[0], CorruptRecordError)
    assert isinstance(got[1], PutResult)
    assert client.exists(redis_store.key("cp", refused.checkpoint_id)) == 0
    assert store.get_run(child_first.run_id).head_checkpoint_id == child_first.checkpoint_id


# -- the connection dropped by the server -----------------------------------------------------
def test_a_killed_connection_between_batches_loses_no_put(redis_store: Opened) -> None:
    store, client = redis_store.store, redis_store.client
    started = [_start(store) for _ in range(4)]
    heads = [first for first, _ in started]
    for _ in range(3):
        # Every other client's connection, the store's pool included.
        client.client_kill_filter(_type="normal", skipme=True)
        puts = [
            Put(next_record(h), lease.token) for h, (_, lease) in zip(heads, started, strict=True)
        ]
        try:
            got: list[PutResult | Exception] = list(store.put_checkpoints(puts))
        except Exception as exc:  # the whole batch lost: none of it may have landed
            got = [exc] * len(puts)
        for put, outcome in zip(puts, got, strict=True):
            head = store.get_run(put.record.run_id).head_checkpoint_id
            if isinstance(outcome, PutResult):
                assert head == put.record.checkpoint_id
            else:
                assert head != put.record.checkpoint_id
        heads = [store.get_checkpoint(store.get_run(h.run_id).head_checkpoint_id) for h in heads]
    # The store works again after the kills.
    assert all(
        isinstance(x, PutResult)
        for x in store.put_checkpoints(
            [Put(next_record(h), lease.token) for h, (_, lease) in zip(heads, started, strict=True)]
        )
    )


def test_a_large_batch_is_written_whole(redis_store: Opened) -> None:
    store = redis_store.store
    started = [_start(store) for _ in range(300)]
    puts = [Put(next_record(first), lease.token) for first, lease in started]
    got = store.put_checkpoints(puts)
    assert len(got) == len(puts)
    assert all(isinstance(x, PutResult) for x in got)
    for put in puts[::37]:
        assert store.get_run(put.record.run_id).head_checkpoint_id == put.record.checkpoint_id


class _DropsTheReply:
    """A TCP relay to the test Redis that, once armed, cuts the connection when the
    reply to a command naming ``after`` comes back: the server ran it, the client never
    hears. A real network fault, between the store and a real server."""

    def __init__(self, after: bytes, *, flush: bool = False) -> None:
        """``flush``: instead of dropping the reply, flush the server's scripts (SCRIPT
        FLUSH from another client) just before the command naming ``after`` goes on."""
        from urllib.parse import urlsplit

        self._flush = flush

        target = urlsplit(services.REDIS_URL)
        self._upstream = (target.hostname or "127.0.0.1", target.port or 6379)
        self._after = after
        self.armed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen()
        self.port = self._listener.getsockname()[1]
        self._start(self._accept)

    def _start(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def close(self) -> None:
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(10)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            self._sockets += [client, upstream]
            sent = threading.Event()
            self._start(self._relay, client, upstream, sent, False)
            self._start(self._relay, upstream, client, sent, True)

    def _relay(
        self, src: socket.socket, dst: socket.socket, sent: threading.Event, reply: bool
    ) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not reply and self.armed.is_set() and self._after in data:
                    if self._flush:
                        self.armed.clear()
                        side = services.redis_client()
                        side.script_flush()
                        side.close()
                    else:
                        sent.set()
                if reply and sent.is_set():
                    self.armed.clear()
                    break  # the reply dropped: the client sees its connection close
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def _behind(relay: _DropsTheReply) -> Iterator[RedisStore]:
    """A store on a fresh prefix reached through ``relay``; both closed afterwards."""
    with services.redis_prefix() as prefix:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the test server keeps nothing on disk
            store = open_store(f"redis://127.0.0.1:{relay.port}/0?prefix={prefix}")
        try:
            assert isinstance(store, RedisStore)
            yield store
        finally:
            store.close()
            relay.close()


def test_a_batch_whose_reply_is_lost_is_written_whole_or_not_at_all() -> None:
    # EXEC ran on the server, its reply never came: the batch raises (each run hears
    # it, in doubt), and what the server holds is every put of it or none.
    relay = _DropsTheReply(b"EXEC")
    with _behind(relay) as store:
        started = [_start(store) for _ in range(5)]
        puts = [Put(next_record(first), lease.token) for first, lease in started]
        relay.armed.set()
        with pytest.raises(redis.ConnectionError):
            store.put_checkpoints(puts)
        moved = {
            store.get_run(p.record.run_id).head_checkpoint_id == p.record.checkpoint_id
            for p in puts
        }
        assert len(moved) == 1  # all or none


def test_scripts_flushed_between_loading_and_exec_are_loaded_again() -> None:
    # SCRIPT FLUSH (or a restart, a failover) after the pipeline checked its scripts
    # and before MULTI/EXEC: every EVALSHA of the batch meets NOSCRIPT. A put alone
    # loads its script again; the batch must too, not fail every run in it.
    relay = _DropsTheReply(b"MULTI", flush=True)
    with _behind(relay) as store:
        started = [_start(store) for _ in range(3)]
        first, lease = started[0]
        a = next_record(first)
        puts = [Put(a, lease.token), Put(next_record(a), lease.token)]
        puts += [Put(next_record(f), token.token) for f, token in started[1:]]
        relay.armed.set()
        got = store.put_checkpoints(puts)
        assert not relay.armed.is_set()  # the flush happened
        assert [type(x) for x in got] == [PutResult] * 4
        assert store.get_run(first.run_id).head_checkpoint_id == puts[1].record.checkpoint_id
