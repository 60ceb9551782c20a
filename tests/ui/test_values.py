"""Any value as an escaped, collapsible tree: nothing a run stored becomes markup."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from savegame.secrets import Secret
from savegame.ui._values import FOLD_AT, MAX_ITEMS, render, scalar


def test_every_text_is_escaped_keys_included() -> None:
    html = render({"<b>key</b>": "<script>alert(1)</script>", "n": [1, None, True]})
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;key&lt;/b&gt;" in html
    assert ">null<" in html and ">true<" in html


def test_a_long_string_shows_its_start_and_folds_the_rest() -> None:
    text = "a" * FOLD_AT + "TAIL"
    html = render({"s": text})
    assert "… 4 more characters" in html
    start, rest = html.split('<details class="fold">')
    assert "a" * FOLD_AT in start and "TAIL" not in start and "TAIL" in rest


def test_a_secret_shows_its_name_never_its_value() -> None:
    html = render({"key": Secret("STRIPE_KEY")})
    assert "Secret(STRIPE_KEY)" in html


def test_a_big_list_stops_after_max_items_and_a_tree_after_its_budget() -> None:
    html = render(list(range(MAX_ITEMS + 7)))
    assert "… 7 more not shown" in html and f">{MAX_ITEMS - 1}<" in html
    capped = render([[n] for n in range(50)], max_nodes=10)
    assert "not shown (the page shows" in capped


@dataclass
class Point:
    x: int
    label: str


def test_registered_objects_bytes_and_times_are_shown_by_their_fields() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    html = render({"p": Point(1, "<i>"), "b": b"\x00\xff", "t": when, "tup": (1, 2)})
    assert 'class="type">Point<' in html and "&lt;i&gt;" in html
    assert "2 bytes: 00ff" in html and "2026-01-02T03:04:05+00:00" in html
    assert "2 items (tuple)" in html
    assert scalar("<x>") == '<span class="v str">&lt;x&gt;</span>'
