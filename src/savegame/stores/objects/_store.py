"""The object-storage wrapper; the package docstring (:mod:`savegame.stores.objects`) describes it."""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from savegame.errors import ConfigurationError, NotFoundError, StoreUnavailableError
from savegame.model import (
    CheckpointRecord,
    EffectRecord,
    Lease,
    RunInfo,
    Waiting,
)
from savegame.redaction import redact_url
from savegame.stores.base import Capabilities, PutResult, Store
from savegame.stores.objects._bucket import (
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
from savegame.stores.objects._delegated import Delegated
from savegame.stores.objects._url import (
    DEFAULT_REGION,
    DEFAULT_THRESHOLD,
    parse_url,
)

DEFAULT_GRACE = 3600.0
_ALL = 2**31 - 1
_BATCH = 500


class ObjectStorageStore(Delegated):
    """A store whose large payloads and blobs live in an S3-compatible bucket.

    The calls that never touch a body pass to the wrapped store unchanged
    (:class:`~savegame.stores.objects._delegated.Delegated`). Sizes from
    ``stats`` and ``run_sizes`` are the wrapped store's: a body in
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
        """Open ``url``'s wrapped store with ``open_inner`` (without our parameters) and wrap it.

        Raises:
            ConfigurationError: a malformed ``objects``/``endpoint``/``threshold``/``region`` value.
            StoreUnavailableError: the bucket cannot be used (checked now, as the other
                backends reach their server when opened, rather than at the first large body).
        """
        parsed = parse_url(url)
        inner = open_inner(parsed.inner_url)
        try:
            store = cls(
                inner,
                parsed.bucket,
                prefix=parsed.prefix,
                threshold=parsed.threshold,
                endpoint=parsed.endpoint,
                region=parsed.region,
            )
        except BaseException:
            inner.close()
            raise
        problem = store._bucket.unusable(store._keys.prefix)
        if problem is not None:
            store.close()
            raise StoreUnavailableError(store.url, problem)
        return store

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
            params.append(("endpoint", self._endpoint))
        if self._region != DEFAULT_REGION:
            params.append(("region", self._region))
        if self._threshold != DEFAULT_THRESHOLD:
            params.append(("threshold", str(self._threshold)))
        inner = self._inner.url
        query = urllib.parse.urlencode(params, safe=":/")
        return redact_url(f"{inner}{'&' if '?' in inner else '?'}{query}")

    @property
    def capabilities(self) -> Capabilities:
        # Its puts upload bodies first, one run at a time: no batch of them to share;
        # schedules would create runs past the bucket (their first bodies inline); and
        # queues are not passed through (this wrapper does not carry their methods).
        return replace(self._inner.capabilities, group_commit=False, schedules=False, queues=False)

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
        sole: bool = False,
    ) -> Lease:
        uploads: list[tuple[str, bytes]] = []
        stored = self._stash_record(first, uploads)
        stored_blobs = self._stash_blobs(blobs, uploads)
        self._bucket.put_many(uploads)
        return self._inner.create_run(
            run, stored, owner=owner, ttl=ttl, blobs=stored_blobs, sole=sole
        )

    def put_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        lease_token: int,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        waiting: Waiting | None = None,
        events: Sequence[EffectRecord] = (),
    ) -> PutResult:
        uploads: list[tuple[str, bytes]] = []
        stored = self._stash_record(record, uploads)
        stored_blobs = self._stash_blobs(blobs, uploads)
        self._bucket.put_many(uploads)
        if waiting is None and not events:
            # A wrapped store without waits (Capabilities.waits) need not know the words.
            return self._inner.put_checkpoint(
                stored, lease_token=lease_token, error=error, effects=effects, blobs=stored_blobs
            )
        return self._inner.put_checkpoint(
            stored, lease_token=lease_token, error=error, effects=effects, blobs=stored_blobs,
            waiting=waiting, events=events,
        )  # fmt: skip

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

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._bucket.close()
            if self._owns_client:
                self._bucket.client.close()  # type: ignore[attr-defined]


def open_with_objects(url: str, open_inner: Callable[[str], Store]) -> ObjectStorageStore:
    """Open the store ``url`` names without the object-storage parameters, wrapped.

    Raises:
        ConfigurationError: a malformed ``objects``/``endpoint``/``threshold``/``region`` value.
    """
    return ObjectStorageStore.from_url(url, open_inner)
