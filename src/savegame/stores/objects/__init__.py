"""Object storage for large bodies: metadata in SQLite or PostgreSQL, bodies in an S3 bucket.

:class:`ObjectStorageStore` wraps any store. Checkpoint payloads and blobs
larger than ``threshold`` bytes go to the bucket; the wrapped store keeps the
rest of the record and, in the body's place, a small marker (see
:mod:`savegame.stores.objects._bucket`). Everything else is delegated.

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

The package: the wrapper in ``_store`` (the calls that move bodies), the calls it
passes through unchanged in ``_delegated``, markers, object keys and the S3
calls in ``_bucket``, the URL parameters in ``_url``.
"""

from savegame.stores.objects._store import DEFAULT_GRACE as DEFAULT_GRACE
from savegame.stores.objects._store import ObjectStorageStore, open_with_objects
from savegame.stores.objects._url import DEFAULT_REGION as DEFAULT_REGION
from savegame.stores.objects._url import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from savegame.stores.objects._url import URL_PARAMS as URL_PARAMS
from savegame.stores.objects._url import has_objects_param

__all__ = ["ObjectStorageStore", "has_objects_param", "open_with_objects"]
