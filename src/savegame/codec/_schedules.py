"""A schedule row's check: what decides what a worker starts is covered.

Like a run row's (:mod:`savegame.codec._runs`): ``c1:`` and an unkeyed BLAKE2b-128
without a keyring, ``m1:<key id>:`` and a keyed tag with one. It covers the name, the
workflow's name and reference (which a worker imports: with a forged reference, a
database edit would become code execution), the cron expression, the input, the missed
policy and window, the metadata, and the queue and priority its runs go in (a forged
queue would lift the limits they run under). The cursor, pause flag and counts move and
are not.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import CorruptRecordError, EncryptionKeyError, UnauthenticatedRecordError
from savegame.stores.schedules import Missed, ScheduleRecord

_PLAIN, _KEYED = "c1:", "m1:"


def _covered(s: ScheduleRecord) -> bytes:
    fields: list[Any] = [
        s.name, s.workflow, s.workflow_ref, s.cron, s.input, Missed(s.missed).value,
        float(s.catchup_window), s.metadata,
    ]  # fmt: skip
    if s.queue is not None or s.priority != 0:
        # Only then, so the rows written before schedules had queues keep their checks;
        # a queue dropped from a row that had one changes what is covered all the same.
        fields.append({"queue": s.queue, "priority": s.priority})
    return b"savegame-schedule-1\0" + orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


def schedule_checksum(schedule: ScheduleRecord, storage: StorageConfig | None) -> str:
    """The check a schedule row carries (``ScheduleRecord.checksum``): keyed under a keyring."""
    ring = resolve(storage).keyring
    if ring is None:
        return _PLAIN + hashlib.blake2b(_covered(schedule), digest_size=16).hexdigest()
    return f"{_KEYED}{ring.active}:{ring.mac(_covered(schedule))}"


def verify_schedule(schedule: ScheduleRecord, storage: StorageConfig | None) -> ScheduleRecord:
    """``schedule`` if its check holds (with a keyring, only a keyed check counts).

    Raises:
        CorruptRecordError: the check fails.
        UnauthenticatedRecordError: with a keyring, the row has no keyed check.
        EncryptionKeyError: the check's key id is not in the keyring.
    """
    config = resolve(storage)
    ring = config.keyring
    label, check = f"schedule {schedule.name}", schedule.checksum
    try:
        covered = _covered(schedule)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(label, f"its row does not encode: {exc}") from None
    if check.startswith(_KEYED):
        kid, _, tag = check[len(_KEYED) :].partition(":")
        if ring is None:
            raise EncryptionKeyError(kid, label)
        if ring.check_mac(covered, kid, tag, label):
            return schedule
    elif ring is not None and not config.accept_plaintext:
        raise UnauthenticatedRecordError(label, "a schedule row without a keyed check")
    elif check == _PLAIN + hashlib.blake2b(covered, digest_size=16).hexdigest():
        return schedule
    raise CorruptRecordError(label, "schedule row checksum mismatch (workflow, cron or input)")
