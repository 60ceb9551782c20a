"""A streamed model call's attempts, marked in the journal.

Chunks reach the step as they arrive, but only the final message is journaled (once,
like any model call's), so a process killed mid-stream recorded nothing: the next
execution asks the model again. That must not pass unseen, since it is paid twice: each
stream is preceded by a marker entry (``<request id>:stream:<n>``, pending, committed
before the first chunk is asked for). The stream that answers leaves its marker done;
one that raised is settled not-done with its error; one whose process died is found
pending by the next execution, which settles it as :data:`ABANDONED` before it asks
again. ``model_calls`` counts them per call.
"""

from __future__ import annotations

from savegame.codec import encode_value
from savegame.effects._journal import Journal
from savegame.effects._prompts import STREAM_MARK
from savegame.errors import describe
from savegame.model import EffectKind, EffectRecord, EffectStatus

ABANDONED = (
    "abandoned: the process stopped mid-stream and nothing was recorded; the model was asked again"
)


def marker_id(request_id: str, n: int) -> str:
    return f"{request_id}{STREAM_MARK}{n}"


def started(journal: Journal, call: EffectRecord) -> EffectRecord:
    """Commit the marker of a new stream for ``call`` (the entry to be recorded), settling
    the markers of streams a dead process left pending as abandoned."""
    n = 1
    while (earlier := journal.get(marker_id(call.request_id, n))) is not None:
        if earlier.status is EffectStatus.PENDING:
            journal.settle(earlier, EffectStatus.NOT_DONE, error=ABANDONED)
        n += 1
    return journal.intent(
        EffectRecord(
            run_id=call.run_id,
            request_id=marker_id(call.request_id, n),
            kind=EffectKind.LLM,
            name=call.name,
            step=call.step,
            node=call.node,
            call_index=call.call_index,
            status=EffectStatus.PENDING,
            arguments=encode_value({"stream": n}, "arguments"),
        )
    )


def ended(journal: Journal, marker: EffectRecord, error: BaseException | None) -> None:
    """The stream answered (its final message is journaled) or raised ``error``."""
    if error is None:
        journal.settle(marker, EffectStatus.DONE)
    else:
        journal.settle(marker, EffectStatus.NOT_DONE, error=describe(error))
