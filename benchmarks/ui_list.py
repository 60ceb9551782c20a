"""The web UI's runs page at 100,000 runs (issue 17), against a bare SQL query of the same page.

A store is filled with ``--runs`` runs (10 per thread; 95% of workflow ``bench-main``,
4% ``bench-other``, 1% ``bench-rare``; statuses mixed: 1 in 10 interrupted, 1 in 20
failed, the rest completed), each with its input checkpoint, through the Store
protocol. Then ``savegame ui``'s app is served by uvicorn on 127.0.0.1 in this
process and each page below is fetched ``--repeat`` times over HTTP (httpx, one
connection), beside:

* **SQL**: the page's runs by a bare query on the backend's own driver (sqlite3,
  psycopg): the same WHERE, ORDER BY and LIMIT the store sends, rows fetched,
  nothing decoded: the floor any listing pays.
* **list_runs**: ``savegame.client.list_runs`` for the same page (rows decoded into RunInfo).
* **page**: the whole HTTP answer: list_runs, one ``history(run, limit=1)`` per row
  for its usage, the template, the transfer.

The ratio is page / SQL, both medians of the same run. The issue's target is an
absolute 200 ms per page; it is reported as measured, beside the ratio.

    python benchmarks/ui_list.py                         # SQLite and PostgreSQL, 100,000 runs
    python benchmarks/ui_list.py --backends sqlite --runs 20000 --repeat 10
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from workload import machine, markdown, median_ms, version

import savegame
from savegame import RunStatus, open_store
from savegame.testing.builders import make_run
from savegame.ui import create_app

PG_URL = os.environ.get("SAVEGAME_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
PAGE = 50
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
COLS = (
    "run_id, thread_id, workflow, workflow_ref, status, step, head_checkpoint_id, created_at,"
    " updated_at, error, metadata, lease_owner, lease_token, lease_expires_at, cancel_requested,"
    " checksum"
)


def _shape(n: int) -> tuple[str, RunStatus]:
    workflow = "bench-rare" if n % 100 == 0 else "bench-other" if n % 25 == 1 else "bench-main"
    status = (
        RunStatus.INTERRUPTED
        if n % 10 == 3
        else RunStatus.FAILED
        if n % 20 == 7
        else RunStatus.COMPLETED
    )
    return workflow, status


def fill(url: str, runs: int, workers: int) -> list[str]:
    """``runs`` runs, oldest first; returns their ids in that order."""
    # SQLite fills without an fsync per run (the pages are then read as written).
    store = open_store(url + "?synchronous=normal" if url.startswith("sqlite") else url)
    ids: list[str] = [""] * runs

    def one(n: int) -> None:
        workflow, status = _shape(n)
        run, first = make_run(f"bench-thread-{n // 10:06d}", workflow=workflow)
        first = replace(first, header=replace(first.header, status=status))
        store.create_run(replace(run, status=status), first, owner=None, ttl=0)
        ids[n] = run.run_id

    started = time.perf_counter()
    if workers == 1:
        for n in range(runs):
            one(n)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(runs)))
    print(f"  filled {runs:,} runs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    store.close()
    return ids


@contextlib.contextmanager
def served(url: str) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(url, port=port)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


def _where(case: dict[str, str], p: str) -> tuple[str, list[Any]]:
    where, params = ["1=1"], []
    for column, key in (("status", "status"), ("workflow", "workflow"), ("thread_id", "thread")):
        if key in case:
            where.append(f"{column} = {p}")
            params.append(case[key])
    if "q" in case:
        where.append(f"(lower(run_id) LIKE {p} OR lower(thread_id) LIKE {p})")
        params += [f"%{case['q'].lower()}%"] * 2
    return " AND ".join(where), params


def bare_query(url: str, case: dict[str, str], before: tuple[int, str] | None) -> Callable[[], Any]:
    """The page's runs straight from the driver."""
    if url.startswith("sqlite"):
        conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        p = "?"
    else:
        import psycopg

        from savegame.stores.postgres import parse_url

        conninfo, options = parse_url(url)
        conn = psycopg.connect(conninfo, autocommit=True)
        conn.execute(f'SET search_path TO "{options["schema"]}"')
        p = "%s"
    where, params = _where(case, p)
    if before is not None:
        where += f" AND (created_at, run_id) < ({p}, {p})"
        params += list(before)
    sql = f"SELECT {COLS} FROM runs WHERE {where} ORDER BY created_at DESC, run_id DESC LIMIT {p}"
    return lambda: conn.execute(sql, (*params, PAGE + 1)).fetchall()


def cases(ids: list[str]) -> list[tuple[str, dict[str, str]]]:
    deep = ids[len(ids) // 2]
    return [
        ("newest 50", {}),
        (f"a page {len(ids) // 2:,} runs deep", {"before": deep}),
        ("status=interrupted", {"status": "interrupted"}),
        ("workflow=bench-rare (1%)", {"workflow": "bench-rare"}),
        ("one thread (10 runs)", {"thread": f"bench-thread-{len(ids) // 20:06d}"}),
        ("text search, 1 match", {"q": ids[len(ids) // 3][-10:].lower()}),
    ]


def measure(url: str, ids: list[str], repeat: int) -> list[list[str]]:
    rows = []
    store = open_store(url, create=False)
    with served(url) as base, httpx.Client(base_url=base, timeout=60) as http:
        for label, case in cases(ids):
            before = None
            if "before" in case:
                info = savegame.client.get_run(case["before"], store=store)
                micros = (info.created_at - EPOCH) // timedelta(microseconds=1)
                before = (micros, info.run_id)
            filters = {k: v for k, v in case.items() if k != "before"}
            sql_ms = median_ms(bare_query(url, filters, before), repeat)
            api = {
                "status": case.get("status"), "workflow": case.get("workflow"),
                "thread_id": case.get("thread"), "search": case.get("q"), "before": case.get("before"),
            }  # fmt: skip
            api_ms = median_ms(
                lambda api=api: savegame.client.list_runs(limit=PAGE + 1, store=store, **api),
                repeat,
            )
            page = http.get("/runs", params=case)
            assert page.status_code == 200, page.text[:500]
            shown = page.text.count("<tr data-run=")
            page_ms = median_ms(
                lambda case=case: http.get("/runs", params=case).raise_for_status(), repeat
            )
            rows.append([
                label, str(shown), f"{sql_ms:.2f}", f"{api_ms:.2f}", f"{page_ms:.1f}",
                f"{page_ms / sql_ms:.0f}x", "yes" if page_ms < 200 else "no",
            ])  # fmt: skip
            print(f"  {label}: page {page_ms:.1f} ms", file=sys.stderr)
    store.close()
    return rows


@contextlib.contextmanager
def backend(name: str) -> Iterator[str]:
    if name == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'ui.db'}"
        return
    import psycopg

    from savegame.stores.postgres import parse_url

    schema = f"bench_ui_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{PG_URL}?schema={schema}&pool_max=4"
    finally:
        with psycopg.connect(parse_url(PG_URL)[0], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(machine(f"starlette {version('starlette')}", f"uvicorn {version('uvicorn')}"))
    header = ["page", "rows", "SQL ms", "list_runs ms", "page ms", "page / SQL", "< 200 ms"]
    for name in args.backends.split(","):
        print(f"{name}: filling", file=sys.stderr)
        with backend(name) as url:
            ids = fill(url, args.runs, 1 if name == "sqlite" else 4)
            print(f"\n### {name}, {args.runs:,} runs, medians of {args.repeat}\n")
            print(markdown(header, measure(url, ids, args.repeat), numeric_from=1))


if __name__ == "__main__":
    main()
