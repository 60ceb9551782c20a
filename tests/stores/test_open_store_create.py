"""open_store(create=False): a store that is not there is refused, never made empty; the
public functions that read or change runs open that way, and name the store they searched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame import END, Workflow
from savegame.errors import NotFoundError, StoreNotFoundError
from savegame.stores import SqliteStore, naming, open_store


def _flow() -> Workflow:
    wf = Workflow("one")

    @wf.step(entry=True)
    def only(state: dict, ctx: object) -> tuple[dict, str]:
        return {"x": 1}, END

    return wf


def test_create_false_refuses_a_missing_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "x.db"
    with pytest.raises(StoreNotFoundError) as info:
        open_store(f"sqlite:///{path}", create=False)
    assert isinstance(info.value, NotFoundError)  # exit code 3 in the CLI
    assert info.value.path == str(path)
    assert str(info.value) == (
        f"no store at sqlite:///{path}: the file {path} does not exist "
        "(only starting a run creates a store)"
    )
    assert not path.parent.exists()
    with pytest.raises(StoreNotFoundError):
        SqliteStore(path, create=False)


def test_create_false_opens_a_store_that_exists(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    savegame.run(_flow(), {}, run_id="r1", store=url)
    with open_store(url, create=False) as store:
        assert [r.run_id for r in store.list_runs()] == ["r1"]


READERS: dict[str, Callable[[str], Any]] = {
    "get_run": lambda url: savegame.client.get_run("r", store=url),
    "list_runs": lambda url: savegame.client.list_runs(store=url),
    "list_threads": lambda url: savegame.client.list_threads(store=url),
    "history": lambda url: savegame.client.history("r", store=url),
    "get_checkpoint": lambda url: savegame.client.get_checkpoint("r", store=url),
    "list_effects": lambda url: savegame.client.list_effects("r", store=url),
    "pending_interrupts": lambda url: savegame.client.pending_interrupts(store=url),
    "resume": lambda url: savegame.resume("r", store=url),
    "approve": lambda url: savegame.approve("r", store=url),
    "reject": lambda url: savegame.reject("r", reason="no", store=url),
    "resolve": lambda url: savegame.resolve("r", "r:1:0", done=False, store=url),
    "cancel": lambda url: savegame.client.cancel("r", store=url),
    "compensate": lambda url: savegame.client.compensate("r", store=url),
    "verify": lambda url: savegame.client.verify(store=url),
    "stats": lambda url: savegame.client.stats(store=url),
    "prune": lambda url: savegame.client.prune(
        savegame.maintenance.RetentionPolicy(keep_last=1), store=url
    ),
    "rekey": lambda url: savegame.client.rekey(store=url),
}


@pytest.mark.parametrize("call", list(READERS.values()), ids=list(READERS))
def test_public_functions_other_than_run_and_submit_create_no_store(
    tmp_path: Path, call: Callable[[str], Any]
) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(StoreNotFoundError):
        call(f"sqlite:///{path}")
    assert list(tmp_path.iterdir()) == []


def test_run_and_submit_create_the_store(tmp_path: Path) -> None:
    savegame.run(_flow(), {}, store=f"sqlite:///{tmp_path / 'a' / 'run.db'}")
    savegame.submit(_flow(), {}, store=f"sqlite:///{tmp_path / 'b' / 'submit.db'}")
    assert (tmp_path / "a" / "run.db").exists() and (tmp_path / "b" / "submit.db").exists()


def test_a_not_found_error_names_the_store_it_searched(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    savegame.run(_flow(), {}, run_id="r1", store=url)
    with pytest.raises(NotFoundError) as info:
        savegame.client.get_run("nope", store=url)
    assert (info.value.kind, info.value.ident, info.value.store) == ("run", "nope", url)
    assert str(info.value) == f"no run 'nope' in {url}"
    # Also for a Store passed in rather than a URL.
    with open_store(url) as store, pytest.raises(NotFoundError) as again:
        savegame.client.get_checkpoint("nope", store=store)
    assert str(again.value) == f"no run or checkpoint 'nope' in {url}"


def test_a_handle_names_the_store_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    savegame.run(_flow(), {}, store=url)
    with pytest.raises(NotFoundError) as info, savegame.connect(url) as sg, naming(sg.store):
        sg.get_run("nope")  # named by the handle, then not again
    assert str(info.value) == f"no run 'nope' in {url}"
