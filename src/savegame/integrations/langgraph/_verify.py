"""After a thread is written: the target saver must return what the source saver returns.

Compared as LangGraph reads them, through each saver's ``list`` (the history,
newest first, paged so a long thread is never held whole) and ``get_tuple`` (the
latest of each namespace): ids, parents, metadata, the checkpoint's fields, each
channel's value and the pending writes in order. A difference names the
checkpoint and what differs (``channel 'messages'``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from itertools import zip_longest
from typing import Any

from savegame import codec

PAGE = 50
#: A thread's report stops after this many differences.
MAX_PROBLEMS = 5


def _conf(thread_id: str, **more: str) -> Any:
    return {"configurable": {"thread_id": thread_id, **more}}


def _pages(saver: Any, thread_id: str, ns: str) -> Iterator[Any]:
    before = None
    while True:
        page = list(saver.list(_conf(thread_id, checkpoint_ns=ns), before=before, limit=PAGE))
        yield from page
        if len(page) < PAGE:
            return
        before = _conf(thread_id, checkpoint_id=page[-1].config["configurable"]["checkpoint_id"])


def history(saver: Any, thread_id: str, namespaces: Iterable[str]) -> Iterator[Any]:
    """Every checkpoint tuple of the thread's namespaces, newest first, a page at a time.

    Paged per namespace and merged: a page of one namespace is read along the tables'
    index (thread, namespace, id), where a page across namespaces had SqliteSaver sort
    every row of the thread, payloads and all, once per page (measured: half the
    migration's time at 400 steps)."""
    return heapq.merge(
        *(_pages(saver, thread_id, ns) for ns in namespaces),
        key=lambda t: t.config["configurable"]["checkpoint_id"],
        reverse=True,
    )


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:  # NaN is not equal to itself; the same encoding is the same value
        return bool(codec.canonical(a) == codec.canonical(b))
    except Exception:
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _id(config: Any) -> str | None:
    return None if config is None else config["configurable"].get("checkpoint_id")


def differences(src: Any, dst: Any) -> list[str]:
    """What ``dst`` (the target's tuple) has otherwise than ``src`` (the source's)."""
    conf = src.config["configurable"]
    where = f"checkpoint {conf['checkpoint_id']} (namespace {conf.get('checkpoint_ns', '')!r})"
    if dst is None:
        return [f"{where}: not in the target"]
    found: list[str] = []
    for name, a, b in (
        ("id", conf["checkpoint_id"], _id(dst.config)),
        (
            "namespace",
            conf.get("checkpoint_ns", ""),
            dst.config["configurable"].get("checkpoint_ns"),
        ),
        ("parent", _id(src.parent_config), _id(dst.parent_config)),
    ):
        if a != b:
            found.append(f"{where}: {name} {a!r} in the source, {b!r} in the target")
    for key in sorted(src.metadata.keys() | dst.metadata.keys()):
        a, b = src.metadata.get(key), dst.metadata.get(key)
        if not _same(a, b):
            found.append(f"{where}: metadata {key!r}: source {_short(a)}, target {_short(b)}")
    for key in sorted(src.checkpoint.keys() | dst.checkpoint.keys()):
        if key == "channel_values":
            continue
        a, b = src.checkpoint.get(key), dst.checkpoint.get(key)
        if not _same(a, b):
            found.append(f"{where}: checkpoint {key!r}: source {_short(a)}, target {_short(b)}")
    values, stored = src.checkpoint["channel_values"], dst.checkpoint["channel_values"]
    for name in sorted(values.keys() | stored.keys()):
        if name not in stored:
            found.append(f"{where}: channel {name!r} is not in the target")
        elif name not in values:
            found.append(f"{where}: channel {name!r} is only in the target")
        elif not _same(values[name], stored[name]):
            found.append(
                f"{where}: channel {name!r} differs: source {_short(values[name])}, "
                f"target {_short(stored[name])}"
            )
    found.extend(_writes(where, src.pending_writes, dst.pending_writes))
    return found


def _writes(where: str, src: list[Any], dst: list[Any]) -> list[str]:
    if len(src) != len(dst):
        return [f"{where}: {len(src)} pending writes in the source, {len(dst)} in the target"]
    for index, (a, b) in enumerate(zip(src, dst, strict=True)):
        if a[:2] != tuple(b[:2]) or not _same(a[2], b[2]):
            return [
                f"{where}: pending write {index} (task {a[0]}, channel {a[1]!r}): "
                f"source {_short(a[2])}, target {_short(b[2])}"
            ]
    return []


def verify_thread(
    source: Any,
    target: Any,
    thread_id: str,
    namespaces: Iterable[str],
    kept: list[tuple[str, str]] | None,
) -> list[str]:
    """The differences between the thread in both savers (at most MAX_PROBLEMS); [] when none.

    ``kept``: the checkpoint ids written, newest first, when not all were (latest
    only); their source tuples are read one by one instead of the source's history.
    """
    found: list[str] = []
    namespaces = list(namespaces)
    if kept is None:
        expected: Iterator[Any] = history(source, thread_id, namespaces)
    else:
        expected = (source.get_tuple(_conf(thread_id, checkpoint_ns=ns, checkpoint_id=cid))
                    for ns, cid in kept)  # fmt: skip
    for src, dst in zip_longest(expected, history(target, thread_id, namespaces)):
        if src is None:
            found.append(f"checkpoint {_id(dst.config)} is only in the target")
        elif dst is not None and _id(dst.config) != _id(src.config):
            found.append(
                f"history: the source's next checkpoint is {_id(src.config)}, "
                f"the target's {_id(dst.config)}"
            )
        else:
            found.extend(differences(src, dst))
        if found:
            return found[:MAX_PROBLEMS]
    for ns in namespaces:
        a = source.get_tuple(_conf(thread_id, checkpoint_ns=ns))
        b = target.get_tuple(_conf(thread_id, checkpoint_ns=ns))
        if a is not None and (b is None or _id(a.config) != _id(b.config)):
            found.append(
                f"latest of namespace {ns!r}: {_id(a.config)} in the source, "
                f"{None if b is None else _id(b.config)} in the target"
            )
        elif a is not None:
            found.extend(differences(a, b))
    return found[:MAX_PROBLEMS]
