"""The rules of effects/_waits.py that need no run: topics, request ids, event entries."""

from __future__ import annotations

from datetime import timedelta

import pytest

from savegame.codec import decode_value, verify_entry
from savegame.effects import as_delta, check_topic, event_entry, event_request_id
from savegame.errors import ConfigurationError, SerializationError
from savegame.model import EffectKind, EffectStatus


def test_request_ids_of_two_topic_and_key_pairs_never_collide() -> None:
    assert event_request_id("a:b", "c") != event_request_id("a", "b:c")
    assert event_request_id("paid", "k") == event_request_id("paid", "k")


@pytest.mark.parametrize("topic", ["", "$child:1", "a\nb", "zero\u200bwidth", "x" * 201, None, 3])
def test_a_topic_that_cannot_name_events_is_refused(topic: object) -> None:
    with pytest.raises(ConfigurationError):
        check_topic(topic)


def test_savegame_s_own_topics_are_allowed_inside() -> None:
    assert check_topic("$child:1", internal=True) == "$child:1"
    assert check_topic("payment received") == "payment received"


def test_an_event_entry_is_pending_sealed_and_keyed() -> None:
    entry = event_entry("r1", "paid", {"amount": 3}, key="k1", by="ada", storage=None)
    assert (entry.kind, entry.status, entry.name) == (
        EffectKind.EVENT,
        EffectStatus.PENDING,
        "paid",
    )
    assert entry.request_id == event_request_id("paid", "k1")
    assert entry.metadata == {"by": "ada", "key": "k1"}
    assert decode_value(verify_entry(entry, None).arguments) == {"amount": 3}
    keyless = event_entry("r1", "paid", 1, key=None, by="ada", storage=None)
    assert (
        keyless.request_id
        != event_entry("r1", "paid", 1, key=None, by="ada", storage=None).request_id
    )
    with pytest.raises(SerializationError):
        event_entry("r1", "paid", object(), key=None, by="ada", storage=None)
    with pytest.raises(ConfigurationError):
        event_entry("r1", "paid", 1, key="", by="ada", storage=None)


def test_a_timeout_is_a_timedelta_or_seconds() -> None:
    assert as_delta(1.5, "t") == timedelta(seconds=1.5)
    assert as_delta(timedelta(days=2), "t") == timedelta(days=2)
    for bad in ("2", True, None):
        with pytest.raises(ConfigurationError):
            as_delta(bad, "t")
