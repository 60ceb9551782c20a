"""How the Redis store talks to its server: keys under its prefix, script calls, pipelines.

The base of each part of :class:`savegame.stores.redis.RedisStore` (the store,
its journal, its storage-engine methods). Calls that name many ids go in
batches of :data:`BATCH`, so no single script holds the server for long; each
batch is atomic on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

import redis
from redis.commands.core import Script

from savegame.errors import LeaseLostError, NotFoundError

BATCH = 500
"""Ids per script call or pipeline."""


class RedisClient:
    """Script and pipeline calls under the store's prefix."""

    _client: redis.Redis
    _p: str
    """The key prefix, ``{name}:``."""
    _scripts: dict[str, Script]

    def _key(self, kind: str, ident: str) -> str:
        return f"{self._p}{kind}:{ident}"

    def _call(self, script: str, *args: bytes | str | int) -> Any:
        """Run one of :data:`SCRIPTS` with the prefix as ``ARGV[1]``; its reply."""
        return self._scripts[script](args=[self._p, *args])

    @staticmethod
    def _checked(reply: list[Any], run_id: str, *, token: int | None) -> list[Any]:
        code = reply[0]
        if code == b"notfound":
            raise NotFoundError("run", run_id)
        if code == b"lost":
            raise LeaseLostError(run_id, -1 if token is None else token)
        return reply

    def _pipeline(self, ids: Sequence[str], command: str, kind: str, *args: Any) -> list[Any]:
        """``command`` on the ``kind`` key of each id, pipelined in batches; the replies in order."""
        out: list[Any] = []
        for start in range(0, len(ids), BATCH):
            pipe = self._client.pipeline(transaction=False)
            for ident in ids[start : start + BATCH]:
                getattr(pipe, command)(self._key(kind, ident), *args)
            out.extend(pipe.execute())
        return out

    def _ids(self, key: str) -> list[str]:
        return [m.decode() for m in cast(list[bytes], self._client.zrange(key, 0, -1))]

    def _batched(self, script: str, ids: Iterable[str]) -> Iterator[Any]:
        batch: list[str] = []
        for ident in ids:
            batch.append(ident)
            if len(batch) == BATCH:
                yield self._call(script, *batch)
                batch = []
        if batch:
            yield self._call(script, *batch)
