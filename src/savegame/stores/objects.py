"""Object storage for large bodies: metadata in SQLite or PostgreSQL, bodies in an S3 bucket.

:class:`ObjectStorageStore` wraps any store. Checkpoint payloads and blobs
larger than ``threshold`` bytes go to the bucket; the wrapped store keeps the
rest of the record and, in the body's place, a small marker (see
:mod:`savegame.stores.objects_bucket`). Everything else is delegated.

Ordering rules, which keep metadata from ever pointing at a missing object:

* A write uploads its bodies first and writes the metadata after every upload
  succeeded. A crash or a failed metadata write in between leaves at most an
  orphan object, which no record refers to; :meth:`ObjectStorageStore.collect_orphans`
  removes it later.
* A delete removes the metadata first, then the objects only it referred to.
  Payload objects are owned by one checkpoint (the key holds its run and id), so
  deleting checkpoints or runs deletes exactly their objects without scanning.
  Blobs are shared by design: ``delete_unreferenced_blobs`` lists the blob
  objects, lets the wrapped store delete its unreferenced rows, then deletes
  the objects no remaining row points at, if they are older than ``grace``
  seconds: an object that young may belong to a write whose metadata is not
  committed yet.
* Objects are immutable (the key ends in the body's hash), so ``rewrite``
  uploads the new bodies under new keys and deletes the old ones only once
  the metadata points at the new ones.

URL: any sqlite or postgres URL with ``objects=s3://bucket/prefix`` and, optionally,
``endpoint=http://host:port``, ``region=`` (default us-east-1) and ``threshold=`` (bytes),
e.g. ``sqlite:///meta.db?objects=s3://bucket/sg&endpoint=http://127.0.0.1:8333``.
Credentials come from the standard AWS environment variables and config files, never the URL.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from savegame.errors import ConfigurationError, NotFoundError
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
)
from savegame.stores.base import Capabilities, RunSize, Store, StoreStats, ThreadInfo, Written
from savegame.stores.objects_bucket import (
    MAGIC,
    MARKER_LEN,
    Bucket,
    Keys,
    Listed,
    Marker,
    S3Client,
    default_client,
    make_marker,
    read_marker,
)

DEFAULT_THRESHOLD = 64 * 1024
DEFAULT_REGION = "us-east-1"
DEFAULT_GRACE = 3600.0
URL_PARAMS = ("objects", "endpoint", "region", "threshold")
"""Query parameters the wrapper takes; the wrapped store's URL is the rest."""
_ALL = 2**31 - 1
_BATCH = 500

__all__ = ["ObjectStorageStore", "has_objects_param", "open_with_objects"]


class ObjectStorageStore:
    """A store whose large payloads and blobs live in an S3-compatible bucket.

    Sizes from ``stats`` and ``run_sizes`` are the wrapped store's: a body in
    the bucket counts as its marker (47 bytes); :meth:`bucket_usage` reports
    the bucket's side. ``delete_unreferenced_blobs`` reports freed blobs at
    their full size.

    Args:
        inner: the store that keeps runs, leases, the journal and the metadata.
        bucket: the bucket name; it must exist.
        prefix: keys start with it (a ``/`` is added); one prefix per metadata store,
            since orphan collection treats every object under it as its own.
        threshold: bodies longer than this many bytes go to the bucket.
        client: a boto3 S3 client; by default one is made from ``endpoint`` and
            ``region``, with credentials from the standard AWS settings.
        grace: objects younger than this many seconds are never collected as garbage.

    Raises:
        ConfigurationError: boto3 is missing (``pip install 'savegame[s3]'``) or an argument is bad.
    """

    def __init__(
        self,
        inner: Store,
        bucket: str,
        *,
        prefix: str = "",
        threshold: int = DEFAULT_THRESHOLD,
        client: Any = None,
        endpoint: str | None = None,
        region: str = DEFAULT_REGION,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        if not bucket or "/" in bucket:
            raise ConfigurationError(f"bad bucket name {bucket!r}")
        if threshold < 0 or grace < 0:
            raise ConfigurationError("threshold and grace must not be negative")
        prefix = prefix.strip("/")
        self._inner = inner
        self._bucket_name, self._prefix = bucket, prefix
        self._threshold, self._grace = threshold, grace
        self._endpoint, self._region = endpoint, region
        self._owns_client = client is None
        s3: S3Client = default_client(endpoint, region) if client is None else client
        self._bucket = Bucket(s3, bucket)
        self._keys = Keys(f"{prefix}/" if prefix else "")

    @classmethod
    def from_url(cls, url: str, open_inner: Callable[[str], Store]) -> ObjectStorageStore:
        """Open ``url``'s wrapped store with ``open_inner`` (without our parameters) and wrap it."""
        return open_with_objects(url, open_inner)

    @property
    def inner(self) -> Store:
        return self._inner

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def threshold(self) -> int:
        return self._threshold

    @property
    def url(self) -> str:
        target = f"s3://{self._bucket_name}" + (f"/{self._prefix}" if self._prefix else "")
        params: list[tuple[str, str]] = [("objects", target)]
        if self._endpoint:
            params.append(("endpoint", _without_userinfo(self._endpoint)))
        if self._region != DEFAULT_REGION:
            params.append(("region", self._region))
        if self._threshold != DEFAULT_THRESHOLD:
            params.append(("threshold", str(self._threshold)))
        inner = self._inner.url
        query = urllib.parse.urlencode(params, safe=":/")
        return f"{inner}{'&' if '?' in inner else '?'}{query}"

    @property
    def capabilities(self) -> Capabilities:
        return self._inner.capabilities

    # -- bodies -------------------------------------------------------------------
    def _stash(
        self, body: bytes, key_of: Callable[[str], str], uploads: list[tuple[str, bytes]]
    ) -> bytes:
        """What the wrapped store keeps for ``body``: itself, or a marker once it is queued for upload."""
        body = bytes(body)
        if len(body) <= self._threshold and not body.startswith(MAGIC):
            return body
        marker, info = make_marker(body)
        uploads.append((key_of(info.hash), body))
        return marker

    def _stash_record(
        self, record: CheckpointRecord, uploads: list[tuple[str, bytes]]
    ) -> CheckpointRecord:
        h = record.header
        payload = self._stash(
            record.payload, lambda x: self._keys.payload(h.run_id, h.checkpoint_id, x), uploads
        )
        return record if payload is record.payload else replace(record, payload=payload)

    def _stash_blobs(
        self, blobs: Mapping[str, bytes] | None, uploads: list[tuple[str, bytes]]
    ) -> dict[str, bytes] | None:
        if blobs is None:
            return None
        stored = {}
        for digest, data in blobs.items():
            key_of = functools.partial(self._keys.blob, digest)
            stored[digest] = self._stash(data, key_of, uploads)
        return stored

    def _payload_key(self, record: CheckpointRecord) -> tuple[str, Marker] | None:
        marker = read_marker(record.payload, record.checkpoint_id)
        if marker is None:
            return None
        return self._keys.payload(record.run_id, record.checkpoint_id, marker.hash), marker

    def _restore(self, records: Sequence[CheckpointRecord]) -> list[CheckpointRecord]:
        wanted: list[tuple[str, str, Marker]] = []
        for record in records:
            if found := self._payload_key(record):
                wanted.append((found[0], record.checkpoint_id, found[1]))
        if not wanted:
            return list(records)
        bodies = self._bucket.get_many(wanted)
        out = []
        for record in records:
            found = self._payload_key(record)
            out.append(record if found is None else replace(record, payload=bodies[found[0]]))
        return out

    # -- writes: upload first, then the metadata --------------------------------------
    def create_run(
        self,
        run: RunInfo,
        first: CheckpointRecord,
        *,
        owner: str | None,
        ttl: float,
        blobs: Mapping[str, bytes] | None = None,
    ) -> Lease:
        uploads: list[tuple[str, bytes]] = []
        stored = self._stash_record(first, uploads)
        stored_blobs = self._stash_blobs(blobs, uploads)
        self._bucket.put_many(uploads)
        return self._inner.create_run(run, stored, owner=owner, ttl=ttl, blobs=stored_blobs)

    def put_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        lease_token: int,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> Written:
        uploads: list[tuple[str, bytes]] = []
        stored = self._stash_record(record, uploads)
        stored_blobs = self._stash_blobs(blobs, uploads)
        self._bucket.put_many(uploads)
        return self._inner.put_checkpoint(
            stored, lease_token=lease_token, error=error, effects=effects, blobs=stored_blobs
        )

    def rewrite(
        self,
        records: Sequence[CheckpointRecord] = (),
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        runs: Sequence[RunInfo] = (),
    ) -> None:
        old = self._record_keys(r.checkpoint_id for r in records)
        old += self._blob_keys(self._inner.get_blobs(list(blobs or ())))
        uploads: list[tuple[str, bytes]] = []
        stored = [self._stash_record(r, uploads) for r in records]
        stored_blobs = self._stash_blobs(blobs, uploads)
        self._bucket.put_many(uploads)
        self._inner.rewrite(stored, effects, stored_blobs, runs)
        new = {key for key, _ in uploads}
        self._bucket.delete([key for key in old if key not in new])

    # -- reads: markers become bodies -------------------------------------------------
    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        return self._restore([self._inner.get_checkpoint(checkpoint_id)])[0]

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord:
        return self._restore([self._inner.latest_checkpoint(run_id)])[0]

    def thread_head(self, thread_id: str) -> CheckpointRecord | None:
        head = self._inner.thread_head(thread_id)
        return None if head is None else self._restore([head])[0]

    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        return self._restore(self._inner.get_chain(checkpoint_id))

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        stored = self._inner.get_blobs(digests)
        wanted: dict[str, tuple[str, str, Marker]] = {}
        for digest, data in stored.items():
            marker = read_marker(data, digest)
            if marker is not None:
                wanted[digest] = (self._keys.blob(digest, marker.hash), digest, marker)
        if not wanted:
            return stored
        bodies = self._bucket.get_many(list(wanted.values()))
        return {d: bodies[wanted[d][0]] if d in wanted else data for d, data in stored.items()}

    # -- deletes: metadata first, then what only it referred to -------------------------
    def _record_keys(self, checkpoint_ids: Any) -> list[str]:
        keys = []
        for checkpoint_id in dict.fromkeys(checkpoint_ids):
            try:
                found = self._payload_key(self._inner.get_checkpoint(checkpoint_id))
            except NotFoundError:
                continue
            if found:
                keys.append(found[0])
        return keys

    def _blob_keys(self, stored: Mapping[str, bytes]) -> list[str]:
        keys = []
        for digest, data in stored.items():
            marker = read_marker(data, digest)
            if marker is not None:
                keys.append(self._keys.blob(digest, marker.hash))
        return keys

    def _run_objects(self, run_ids: Sequence[str]) -> dict[str, list[str]]:
        return {
            run_id: [o.key for o in self._bucket.list(self._keys.payload_run(run_id))]
            for run_id in dict.fromkeys(run_ids)
        }

    def _delete_run_objects(self, listed: Mapping[str, list[str]]) -> None:
        gone = []
        for run_id, keys in listed.items():
            try:
                self._inner.get_run(run_id)
            except NotFoundError:
                gone.extend(keys)
        self._bucket.delete(gone)

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        keys = self._record_keys(checkpoint_ids)
        deleted = self._inner.delete_checkpoints(checkpoint_ids)
        # The key holds the checkpoint's id: no other record can refer to these objects.
        self._bucket.delete(keys)
        return deleted

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        # Listed before the metadata goes: objects uploaded later belong to no deleted run.
        listed = self._run_objects(run_ids)
        deleted = self._inner.delete_runs(run_ids)
        self._delete_run_objects(listed)
        return deleted

    def delete_thread(self, thread_id: str) -> int:
        runs = self._inner.list_runs(thread_id=thread_id, limit=_ALL)
        listed = self._run_objects([r.run_id for r in runs])
        deleted = self._inner.delete_thread(thread_id)
        self._delete_run_objects(listed)
        return deleted

    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        """As the wrapped store's, with the freed bytes of offloaded blobs counted at their body size."""
        # Listed before the rows go, so an object uploaded meanwhile is not even considered.
        listed = list(self._bucket.list(f"{self._keys.prefix}blobs/"))
        digests = list(dict.fromkeys(p[0] for o in listed if (p := self._keys.parse_blob(o.key))))
        offloaded = self._markers(digests)
        count, freed = self._inner.delete_unreferenced_blobs()
        for start in range(0, len(offloaded), _BATCH):
            batch = list(offloaded)[start : start + _BATCH]
            for digest in self._inner.missing_blobs(batch):
                freed += offloaded[digest].size - MARKER_LEN
        self._bucket.delete(self._garbage_blobs(listed))
        return count, freed

    def _markers(self, digests: Sequence[str]) -> dict[str, Marker]:
        """The markers the wrapped store holds for these digests (inline blobs left out)."""
        found: dict[str, Marker] = {}
        for start in range(0, len(digests), _BATCH):
            for digest, data in self._inner.get_blobs(digests[start : start + _BATCH]).items():
                if (marker := read_marker(data, digest)) is not None:
                    found[digest] = marker
        return found

    def _young(self, obj: Listed) -> bool:
        return obj.last_modified > datetime.now(timezone.utc) - timedelta(seconds=self._grace)

    def _garbage_blobs(self, listed: Sequence[Listed]) -> list[str]:
        parsed = [
            (o, p) for o in listed if (p := self._keys.parse_blob(o.key)) and not self._young(o)
        ]
        digests = list(dict.fromkeys(digest for _, (digest, _) in parsed))
        live: set[str] = set()
        for start in range(0, len(digests), _BATCH):
            live.update(self._blob_keys(self._inner.get_blobs(digests[start : start + _BATCH])))
        return [o.key for o, _ in parsed if o.key not in live]

    def _garbage_payloads(self, listed: Sequence[Listed]) -> list[str]:
        garbage, live = [], {}
        for obj in listed:
            parsed = self._keys.parse_payload(obj.key)
            if parsed is None or self._young(obj):
                continue
            _, checkpoint_id, _ = parsed
            if checkpoint_id not in live:
                live[checkpoint_id] = self._record_keys([checkpoint_id])
            if obj.key not in live[checkpoint_id]:
                garbage.append(obj.key)
        return garbage

    def collect_orphans(self) -> int:
        """Delete objects older than ``grace`` that no record or blob points at; return how many.

        Orphans come from writes that failed or crashed after their upload, and
        from deletes interrupted before their objects went. This reads the whole
        bucket prefix and one record per payload object; run it now and then.
        """
        payloads = self._garbage_payloads(list(self._bucket.list(f"{self._keys.prefix}payloads/")))
        blobs = self._garbage_blobs(list(self._bucket.list(f"{self._keys.prefix}blobs/")))
        return self._bucket.delete(payloads + blobs)

    def bucket_usage(self) -> tuple[int, int]:
        """(objects, bytes) under the prefix, orphans included."""
        count = size = 0
        for obj in self._bucket.list(self._keys.prefix):
            count, size = count + 1, size + obj.size
        return count, size

    # -- delegated unchanged ----------------------------------------------------------
    def get_run(self, run_id: str) -> RunInfo:
        return self._inner.get_run(run_id)

    def list_runs(
        self, *, thread_id: str | None = None, status: RunStatus | None = None, limit: int = 100
    ) -> list[RunInfo]:
        return self._inner.list_runs(thread_id=thread_id, status=status, limit=limit)

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        return self._inner.list_threads(limit=limit)

    def list_checkpoints(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        return self._inner.list_checkpoints(run_id, limit=limit, before=before, metadata=metadata)

    def claim_run(
        self, owner: str, ttl: float, *, workflows: Sequence[str] | None = None
    ) -> Lease | None:
        return self._inner.claim_run(owner, ttl, workflows=workflows)

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        return self._inner.acquire_lease(run_id, owner, ttl, takeover_token=takeover_token)

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        return self._inner.renew_lease(run_id, token, ttl)

    def release_lease(self, run_id: str, token: int) -> None:
        self._inner.release_lease(run_id, token)

    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        return self._inner.record_intent(effect, lease_token=lease_token)

    def record_result(
        self,
        run_id: str,
        request_id: str,
        *,
        status: EffectStatus,
        result: bytes | None = None,
        error: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        checksum: str,
        lease_token: int | None,
        expect: EffectStatus | None = None,
    ) -> EffectRecord:
        return self._inner.record_result(
            run_id,
            request_id,
            status=status,
            result=result,
            error=error,
            metadata=metadata,
            checksum=checksum,
            lease_token=lease_token,
            expect=expect,
        )

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        return self._inner.get_effect(run_id, request_id)

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        return self._inner.list_effects(run_id, kinds=kinds, statuses=statuses, limit=limit)

    def request_cancel(self, run_id: str) -> None:
        self._inner.request_cancel(run_id)

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        return self._inner.missing_blobs(digests)

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        return self._inner.run_sizes(thread_id=thread_id, limit=limit)

    def stats(self) -> StoreStats:
        return self._inner.stats()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._bucket.close()
            if self._owns_client:
                self._bucket.client.close()  # type: ignore[attr-defined]


# -- URLs ------------------------------------------------------------------------------
def has_objects_param(url: str) -> bool:
    return any(key == "objects" for key, _ in _query(url))


def _query(url: str) -> list[tuple[str, str]]:
    return urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)


def _without_userinfo(endpoint: str) -> str:
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def open_with_objects(url: str, open_inner: Callable[[str], Store]) -> ObjectStorageStore:
    """Open the store ``url`` names without the object-storage parameters, wrapped.

    Raises:
        ConfigurationError: a malformed ``objects``/``endpoint``/``threshold``/``region`` value.
    """
    ours = {k: v for k, v in _query(url) if k in URL_PARAMS}
    target = urllib.parse.urlsplit(ours.get("objects", ""))
    if target.scheme != "s3" or not target.hostname or target.username or target.password:
        raise ConfigurationError(
            f"bad objects= value in {url!r}: expected s3://bucket/prefix "
            "(credentials come from the AWS environment variables or config, never the URL)"
        )
    endpoint = ours.get("endpoint") or None
    if endpoint is not None:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
            raise ConfigurationError(
                f"bad endpoint= value in {url!r}: expected http(s)://host:port"
            )
    try:
        threshold = int(ours.get("threshold", DEFAULT_THRESHOLD))
    except ValueError:
        raise ConfigurationError(f"bad threshold= value in {url!r}: expected bytes") from None
    # Rebuilt by hand: urlunsplit would turn sqlite:///x into sqlite:/x (no netloc scheme).
    rest = [(k, v) for k, v in _query(url) if k not in URL_PARAMS]
    inner_url = url.partition("?")[0] + (f"?{urllib.parse.urlencode(rest)}" if rest else "")
    inner = open_inner(inner_url)
    try:
        return ObjectStorageStore(
            inner,
            target.netloc,
            prefix=target.path,
            threshold=threshold,
            endpoint=endpoint,
            region=ours.get("region") or DEFAULT_REGION,
        )
    except BaseException:
        inner.close()
        raise
