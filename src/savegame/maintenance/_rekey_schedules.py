"""``savegame rekey`` for schedule rows: each one's check made again under the active key.

A schedule row holds no encrypted value, only its check (``codec/_schedules.py``). Like
the run rows, a row is read strictly: one whose check fails, or that carries no keyed
check without ``adopt``, is left as it was and reported (as ``schedule:<name>``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from savegame.codec import schedule_checksum, verify_schedule
from savegame.codec.storage import StorageConfig
from savegame.errors import EncryptionKeyError, SavegameError, UnauthenticatedRecordError
from savegame.stores.base import Store
from savegame.stores.schedules import schedules_of


def rekey_schedules(
    store: Store, config: StorageConfig, adopt: bool, skip: Callable[[str, str], None]
) -> tuple[int, int]:
    """Re-sign every schedule row; (rows re-signed, rows adopted). ``skip(name, why)``
    hears of each row left as it was.

    Raises:
        EncryptionKeyError: a row's check names a key the keyring lacks.
    """
    if not store.capabilities.schedules:
        return 0, 0
    rows = schedules_of(store)
    done = adopted = 0
    for found in rows.list_schedules():
        try:
            verify_schedule(found, config)
        except UnauthenticatedRecordError as exc:
            if not adopt:
                skip(f"schedule:{found.name}", str(exc))
                continue
            verify_schedule(found, replace(config, accept_plaintext=True))
            adopted += 1
        except EncryptionKeyError:
            raise
        except SavegameError as exc:
            skip(f"schedule:{found.name}", str(exc))
            continue
        # The row as read (its cursor too): a cursor a firer moved meanwhile goes back at
        # most, and an occurrence fired again finds its run there and starts nothing.
        rows.put_schedule(replace(found, checksum=schedule_checksum(found, config)), replace=True)
        done += 1
    return done, adopted
