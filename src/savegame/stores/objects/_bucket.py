"""The bucket half of :class:`~savegame.stores.objects.ObjectStorageStore`.

Markers, object keys and the few S3 calls the wrapper makes, kept apart so
the store module reads as the ordering rules it enforces.

A body moved to the bucket is replaced in the metadata store by a fixed-size
marker: ``MAGIC + size (8 bytes, big-endian) + blake2b-256 of the body``. The
object key is derived from where the marker sits (the checkpoint's run and id,
or the blob's digest) plus that hash, so every object is immutable: new bytes
get a new key, and an object the committed metadata points at is never
overwritten. Downloads are checked against the size and hash in the marker.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar
from urllib.parse import quote, unquote

from savegame.errors import ConfigurationError, CorruptRecordError

MAGIC = b"\x00sg-s3\x00"
"""Starts every marker. An inline body that starts with it is uploaded whatever its size,
so a body left inline is never mistaken for a marker."""
_SIZE = struct.Struct(">Q")
_HASH_BYTES = 32
MARKER_LEN = len(MAGIC) + _SIZE.size + _HASH_BYTES
_DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes
_NOT_FOUND = frozenset({"NoSuchKey", "404", "NotFound"})

T = TypeVar("T")
R = TypeVar("R")


class S3Client(Protocol):
    """The calls made on a boto3 S3 client (boto3 ships no type hints, so they are loose)."""

    def put_object(self, **kwargs: Any) -> Any: ...
    def get_object(self, **kwargs: Any) -> Any: ...
    def list_objects_v2(self, **kwargs: Any) -> Any: ...
    def delete_objects(self, **kwargs: Any) -> Any: ...


class Marker(NamedTuple):
    size: int
    hash: str
    """blake2b-256 of the body, hex."""


def body_hash(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=_HASH_BYTES).hexdigest()


def make_marker(body: bytes) -> tuple[bytes, Marker]:
    digest = hashlib.blake2b(body, digest_size=_HASH_BYTES).digest()
    return MAGIC + _SIZE.pack(len(body)) + digest, Marker(len(body), digest.hex())


def read_marker(data: bytes, record_id: str) -> Marker | None:
    """The marker ``data`` holds, or None for a body stored inline.

    Raises:
        CorruptRecordError: ``data`` starts like a marker but is not one.
    """
    if not data.startswith(MAGIC):
        return None
    if len(data) != MARKER_LEN:
        raise CorruptRecordError(record_id, "malformed object-storage marker")
    (size,) = _SIZE.unpack_from(data, len(MAGIC))
    return Marker(size, data[len(MAGIC) + _SIZE.size :].hex())


def check_body(body: bytes, marker: Marker, record_id: str, where: str) -> bytes:
    if len(body) != marker.size or body_hash(body) != marker.hash:
        raise CorruptRecordError(
            record_id, f"object {where} does not match its marker (size or hash differs)"
        )
    return body


def is_missing(exc: BaseException) -> bool:
    """True for the botocore error S3 answers an absent key with."""
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in _NOT_FOUND


@dataclass(frozen=True, slots=True)
class Listed:
    key: str
    size: int
    last_modified: datetime


class Keys:
    """Object keys under one prefix; ids and digests are %-quoted so any string is a safe segment."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def payload_run(self, run_id: str) -> str:
        return f"{self.prefix}payloads/{quote(run_id, safe='')}/"

    def payload(self, run_id: str, checkpoint_id: str, hash_: str) -> str:
        return f"{self.payload_run(run_id)}{quote(checkpoint_id, safe='')}/{hash_}"

    def blob(self, digest: str, hash_: str) -> str:
        return f"{self.prefix}blobs/{quote(digest, safe='')}/{hash_}"

    def parse_payload(self, key: str) -> tuple[str, str, str] | None:
        """(run_id, checkpoint_id, hash) of a payload key, None for a foreign key."""
        parts = key[len(self.prefix) :].split("/")
        if len(parts) != 4 or parts[0] != "payloads":
            return None
        return unquote(parts[1]), unquote(parts[2]), parts[3]

    def parse_blob(self, key: str) -> tuple[str, str] | None:
        """(digest, hash) of a blob key, None for a foreign key."""
        parts = key[len(self.prefix) :].split("/")
        if len(parts) != 3 or parts[0] != "blobs":
            return None
        return unquote(parts[1]), parts[2]


class Bucket:
    """Concurrent puts, gets and deletes on one bucket."""

    def __init__(self, client: S3Client, name: str, *, workers: int = 8) -> None:
        self.client = client
        self.name = name
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="savegame-s3")

    def _each(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))

    def unusable(self, prefix: str) -> str | None:
        """Why the store cannot use the bucket (no server at the endpoint, no credentials,
        no such bucket, access denied), from one listing under ``prefix``; None if it can.
        A listing, not HeadBucket: the store lists its prefix anyway (orphan collection),
        and a policy may allow that and nothing above it."""
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

        try:
            self.client.list_objects_v2(Bucket=self.name, Prefix=prefix, MaxKeys=1)
        except (BotoCoreError, ClientError) as exc:
            return f"bucket {self.name}: {exc}"
        return None

    def put_many(self, uploads: Sequence[tuple[str, bytes]]) -> None:
        """Upload every (key, body); returns only when all are stored, raises if any failed."""

        def put(item: tuple[str, bytes]) -> None:
            self.client.put_object(Bucket=self.name, Key=item[0], Body=item[1])

        self._each(put, uploads)

    def get_many(self, wanted: Sequence[tuple[str, str, Marker]]) -> dict[str, bytes]:
        """Download each (key, record id, marker), checked; key -> body.

        Raises:
            CorruptRecordError: an object is missing or does not match its marker,
                naming the record (checkpoint id or blob digest) that points at it.
        """

        def get(item: tuple[str, str, Marker]) -> tuple[str, bytes]:
            key, record_id, marker = item
            where = f"s3://{self.name}/{key}"
            try:
                body = self.client.get_object(Bucket=self.name, Key=key)["Body"].read()
            except Exception as exc:
                if is_missing(exc):
                    raise CorruptRecordError(
                        record_id, f"its body {where} is missing from the object store"
                    ) from exc
                raise
            return key, check_body(bytes(body), marker, record_id, where)

        return dict(self._each(get, list({item[0]: item for item in wanted}.values())))

    def list(self, prefix: str) -> Iterator[Listed]:
        token: str | None = None
        while True:
            page = self.client.list_objects_v2(
                Bucket=self.name, Prefix=prefix, **({"ContinuationToken": token} if token else {})
            )
            for obj in page.get("Contents", ()):
                yield Listed(obj["Key"], int(obj["Size"]), obj["LastModified"])
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def delete(self, keys: Sequence[str]) -> int:
        """Delete these keys (absent ones are fine); return how many were asked for."""
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _DELETE_BATCH):
            batch = unique[start : start + _DELETE_BATCH]
            answer = self.client.delete_objects(
                Bucket=self.name,
                Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
            )
            errors = [e for e in answer.get("Errors", ()) if e.get("Code") not in _NOT_FOUND]
            if errors:
                first = errors[0]
                raise OSError(
                    f"could not delete {len(errors)} object(s) from s3://{self.name}, "
                    f"e.g. {first.get('Key')}: {first.get('Code')} {first.get('Message')}"
                )
        return len(unique)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def default_client(endpoint: str | None, region: str) -> Any:
    """A boto3 S3 client; credentials come from the standard AWS variables and config files.

    Raises:
        ConfigurationError: boto3 is not installed.
    """
    try:
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigurationError(
            f"object storage needs boto3, which is not installed ({exc}); "
            "install it with: pip install 'savegame[s3]'"
        ) from exc
    config = Config(
        retries={"max_attempts": 5, "mode": "standard"},
        max_pool_connections=16,
        # S3-compatible servers (SeaweedFS, MinIO) rarely serve virtual-host buckets.
        s3={"addressing_style": "path"} if endpoint else {},
    )
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)
