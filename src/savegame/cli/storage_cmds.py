"""Commands that keep a store small and sound: verify, prune, stats, rekey, keygen.

Encryption keys come from the environment, as for every other command:
``SAVEGAME_KEYS="kid1:<base64 key>,kid2:<base64 key>"``, the first key active
(new records and ``rekey`` write with it), the others still read.
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

import savegame
from savegame.cli import jsonview, render, storage_view
from savegame.cli.common import parse_duration
from savegame.cli.errors import DamageFound, UsageError
from savegame.cli.handles import connected
from savegame.cli.options import JsonOption, LimitOption, StoreOption
from savegame.cli.words import plural
from savegame.codec.crypto import new_key
from savegame.errors import EncryptionKeyError
from savegame.integrations import langgraph
from savegame.model import utcnow

RunOption = Annotated[
    str | None,
    typer.Option("--run", metavar="RUN_ID", help="Only this run (default: every run)."),
]

KEYS_HELP = (
    "Keys come from $SAVEGAME_KEYS, a comma-separated list of kid:base64key "
    "(32-byte AES-256 keys; `savegame keygen` makes one). The first key is active: "
    "it writes. The others still read, so to rotate, put the new key first and keep "
    "the old ones until `savegame rekey` has run."
)


def verify_command(
    run: RunOption = None, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """Check every checkpoint, blob and journal entry; list damaged records by id.

    Reads with the keys in $SAVEGAME_KEYS. Changes nothing. Exits with code 9
    when it finds damage.
    """
    sg = connected(store)
    with storage_view.run_bar("verifying", enabled=not as_json) as bar:
        report = sg.verify(run_id=run, progress=bar)
    if as_json:
        jsonview.emit(jsonview.verified(report))
    else:
        storage_view.verified(render.console(), report)
    if report.damaged:
        raise DamageFound(
            f"{plural(len(report.damaged), 'damaged record')} "
            f"in {plural(len({d.run_id for d in report.damaged}), 'run')}"
        )
    if report.missing_keys:
        # Not damage: a setup problem, said in one line (exit 1), as a load would say it.
        kid, record_id = next(iter(report.missing_keys.items()))
        raise EncryptionKeyError(kid, record_id)


DURATION = "a duration: 30s, 15m, 12h, 7d, 2w"


def prune_command(
    keep_last: Annotated[
        int | None,
        typer.Option(
            "--keep-last",
            metavar="N",
            min=1,
            help="Per run, keep the N newest checkpoints (the head always stays).",
        ),
    ] = None,
    ttl: Annotated[
        str | None,
        typer.Option(
            "--ttl", metavar="DURATION", help=f"Delete checkpoints older than this ({DURATION})."
        ),
    ] = None,
    finished_for: Annotated[
        str | None,
        typer.Option(
            "--finished-for",
            metavar="DURATION",
            help="Delete whole runs that finished longer ago than this "
            f"({DURATION}); a compensation_failed run stays unless --include-waiting.",
        ),
    ] = None,
    include_waiting: Annotated[
        bool,
        typer.Option(
            "--include-waiting",
            help="Also prune runs waiting for a person (interrupted, needs_attention, "
            "compensation_failed: a saga that still owes compensations).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only say what would be deleted.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete old checkpoints and finished runs; what a kept checkpoint needs to load stays.

    A LangGraph thread goes as one (all its namespaces), once finished and idle for
    --finished-for; one with tasks left (an interrupt, a breakpoint) waits for a
    person, as an interrupted run does.
    """
    if keep_last is None and ttl is None and finished_for is None:
        raise UsageError(
            "say what to delete: --keep-last N, --ttl DURATION or --finished-for DURATION"
        )
    policy = savegame.maintenance.RetentionPolicy(
        keep_last=keep_last,
        ttl=parse_duration(ttl, "--ttl", at_most=savegame.maintenance.RetentionPolicy.MAX_AGE),
        finished_for=parse_duration(
            finished_for, "--finished-for", at_most=savegame.maintenance.RetentionPolicy.MAX_AGE
        ),
        include_waiting=include_waiting,
    )
    plan = connected(store).prune(
        policy, dry_run=dry_run, rules={"langgraph": langgraph.retention()}
    )
    if as_json:
        jsonview.emit(jsonview.pruned(plan))
    else:
        storage_view.pruned(render.console(), plan)


def stats_command(
    thread: Annotated[
        str | None, typer.Option("--thread", metavar="THREAD", help="Only runs of this thread.")
    ] = None,
    limit: LimitOption = 20,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the store's size, then its largest runs."""
    report = connected(store).stats(thread_id=thread, limit=limit)
    if as_json:
        jsonview.emit(jsonview.store_report(report))
    else:
        storage_view.store_report(render.console(), report)


def rekey_command(
    run: RunOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    adopt: Annotated[
        bool,
        typer.Option(
            "--adopt",
            help="Also sign records that carry no authentication (a plain store being "
            "encrypted, or one written by an older savegame): rekey vouches for what it "
            "signs, so check the store first (savegame verify) and keep other writers out.",
        ),
    ] = False,
) -> None:
    """Re-encrypt every payload, blob, journal entry and run row under the active key.

    Blobs are renamed to digests keyed by it. A run that is damaged, being executed,
    or (without --adopt) not authenticated is left as it was and listed; the exit
    code is then 9.
    """
    sg = connected(store)
    with storage_view.run_bar("re-keying", enabled=not as_json) as bar:
        report = sg.rekey(run_id=run, progress=bar, adopt=adopt)
    if as_json:
        jsonview.emit(jsonview.rekeyed(report))
    else:
        storage_view.rekeyed(render.console(), report)
    if report.skipped:
        raise DamageFound(f"{plural(len(report.skipped), 'run')} left as they were (listed above)")


_KID = re.compile(r"[A-Za-z0-9._-]+")


def keygen_command(
    kid: Annotated[
        str | None,
        typer.Option(
            "--id", metavar="KID", help="The key id (default: today's date, e.g. 2025-06-01)."
        ),
    ] = None,
) -> None:
    """Print a new random key as kid:base64key, the form $SAVEGAME_KEYS takes.

    First key:  export SAVEGAME_KEYS="$(savegame keygen)".
    Rotation:   SAVEGAME_KEYS="$(savegame keygen),$SAVEGAME_KEYS", then `savegame rekey`.
    """
    name = kid if kid is not None else utcnow().strftime("%Y-%m-%d")
    if not _KID.fullmatch(name):
        raise UsageError(f"--id {name!r}: use letters, digits, '.', '_' or '-' (no ',' or ':')")
    typer.echo(f"{name}:{new_key()}")


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=KEYS_HELP)(verify_command)
    app.command("prune")(prune_command)
    app.command("stats")(stats_command)
    app.command("rekey", epilog=KEYS_HELP)(rekey_command)
    app.command("keygen", epilog=KEYS_HELP)(keygen_command)
