"""Reading runs for people: list_runs a page at a time, by the last run id of a page."""

from __future__ import annotations

from typing import Any

import pytest

from savegame import END, StepContext, Store, Workflow, run
from savegame.client import list_runs
from savegame.errors import NotFoundError

counter = Workflow("history-counter")
other = Workflow("history-other")


@counter.step(entry=True)
@other.step(entry=True)
def once(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"done": True}, END


def test_list_runs_walks_pages_by_the_last_run_id_of_the_page(store: Store) -> None:
    started = [run(counter if n % 2 else other, {}, store=store).run_id for n in range(5)]
    pages: list[list[str]] = []
    before = None
    while page := [r.run_id for r in list_runs(limit=2, before=before, store=store)]:
        pages.append(page)
        before = page[-1]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [rid for p in pages for rid in p] == started[::-1]
    assert [r.run_id for r in list_runs(workflow="history-counter", store=store)] == [
        started[3],
        started[1],
    ]
    assert [r.run_id for r in list_runs(search=started[2].lower(), store=store)] == [started[2]]
    assert list_runs(search="", store=store) == list_runs(store=store)  # no text, no filter


def test_a_page_after_a_run_that_is_not_there_is_an_error(store: Store) -> None:
    run(counter, {}, store=store)
    with pytest.raises(NotFoundError, match="no-such-run"):
        list_runs(before="no-such-run", store=store)
