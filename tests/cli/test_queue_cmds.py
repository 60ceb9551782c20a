"""savegame queues (declare, show) and submit --queue / worker --queue through the real entry point."""

from __future__ import annotations

from typing import Any

from .test_errors import assert_one_error_line


def test_queues_declared_filled_shown_and_drained(cli: Any, ref: str, store: str) -> None:
    assert "no queues declared" in cli("queues", "--store", store).stdout
    out = cli("queues", "declare", "emails", "--concurrency", "2", "--limit", "10",
              "--period", "60", "--store", store)  # fmt: skip
    assert out.exit_code == 0 and "queue emails declared" in out.stdout, out.stderr
    first = cli("submit", ref, "--input", '{"until": 1}', "--queue", "emails", "--dedup-key",
                "o-1", "--store", store, "--json").json()  # fmt: skip
    again = cli("submit", ref, "--input", '{"until": 1}', "--queue", "emails", "--dedup-key",
                "o-1", "--store", store, "--json").json()  # fmt: skip
    assert again["run_id"] == first["run_id"]
    cli("submit", ref, "--input", '{"until": 1}', "--store", store)  # of no queue
    [shown] = cli("queues", "--store", store, "--json").json()
    assert shown == {
        "name": "emails", "concurrency": 2, "worker_concurrency": None, "limit": 10,
        "period": 60.0, "queued": 1, "running": 0, "started_in_period": 0, "unfinished": 1,
    }  # fmt: skip
    table = cli("queues", "--store", store).stdout
    assert "emails" in table and "0/10 per 60s" in table
    out = cli("worker", "--queue", "emails", "--exit-when-idle", "0.3", "--poll", "0.02",
              "--store", store)  # fmt: skip
    assert out.exit_code == 0 and "claimed 1 run (1 completed)" in out.stdout, out.stdout
    [shown] = cli("queues", "--store", store, "--json").json()
    assert (shown["queued"], shown["started_in_period"], shown["unfinished"]) == (0, 1, 0)
    queued = cli("runs", "--status", "queued", "--store", store, "--json").json()
    assert len(queued) == 1  # the run of no queue was not that worker's


def test_an_undeclared_queue_and_a_bad_limit_are_one_error_line(
    cli: Any, ref: str, store: str
) -> None:
    assert_one_error_line(cli("submit", ref, "--queue", "nope", "--store", store), "nope")
    bad = cli("queues", "declare", "q", "--concurrency", "0", "--store", store)
    assert bad.exit_code == 2 and "--concurrency" in bad.stderr
    assert_one_error_line(cli("queues", "--store", "memory://"), "has no queues")
