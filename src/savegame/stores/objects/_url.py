"""The object-storage parameters of a store URL: ``objects=s3://bucket/prefix`` and its options."""

from __future__ import annotations

import urllib.parse
from typing import NamedTuple

from savegame.errors import ConfigurationError
from savegame.redaction import redact_url

DEFAULT_THRESHOLD = 64 * 1024
DEFAULT_REGION = "us-east-1"
URL_PARAMS = ("objects", "endpoint", "region", "threshold")
"""Query parameters the wrapper takes; the wrapped store's URL is the rest."""


class ObjectsUrl(NamedTuple):
    """A store URL with ``objects=``, taken apart."""

    inner_url: str
    """The wrapped store's URL: the given one without :data:`URL_PARAMS`."""
    bucket: str
    prefix: str
    threshold: int
    endpoint: str | None
    region: str


def has_objects_param(url: str) -> bool:
    return any(key == "objects" for key, _ in _query(url))


def _query(url: str) -> list[tuple[str, str]]:
    return urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)


def _credentials(param: str, url: str) -> ConfigurationError:
    # The URL shown has them removed, so the message says what was there.
    return ConfigurationError(
        f"bad {param}= value in {redact_url(url)!r}: it holds credentials (user:password@), "
        "which come from the AWS environment variables or config, never the URL"
    )


def parse_url(url: str) -> ObjectsUrl:
    """Take apart a store URL with ``objects=`` (see :mod:`savegame.stores.objects`).

    Raises:
        ConfigurationError: a malformed ``objects``/``endpoint``/``threshold``/``region`` value.
    """
    ours = {k: v for k, v in _query(url) if k in URL_PARAMS}
    target = urllib.parse.urlsplit(ours.get("objects", ""))
    if "@" in target.netloc:
        raise _credentials("objects", url)
    if target.scheme != "s3" or not target.hostname:
        raise ConfigurationError(
            f"bad objects= value in {redact_url(url)!r}: expected s3://bucket/prefix"
        )
    endpoint = ours.get("endpoint") or None
    if endpoint is not None:
        parts = urllib.parse.urlsplit(endpoint)
        if "@" in parts.netloc:
            raise _credentials("endpoint", url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"bad endpoint= value in {redact_url(url)!r}: expected http(s)://host:port"
            )
    try:
        threshold = int(ours.get("threshold", DEFAULT_THRESHOLD))
    except ValueError:
        raise ConfigurationError(
            f"bad threshold= value in {redact_url(url)!r}: expected bytes"
        ) from None
    # Rebuilt by hand: urlunsplit would turn sqlite:///x into sqlite:/x (no netloc scheme).
    rest = [(k, v) for k, v in _query(url) if k not in URL_PARAMS]
    inner_url = url.partition("?")[0] + (f"?{urllib.parse.urlencode(rest)}" if rest else "")
    return ObjectsUrl(
        inner_url,
        target.netloc,
        target.path,
        threshold,
        endpoint,
        ours.get("region") or DEFAULT_REGION,
    )
