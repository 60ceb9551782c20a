"""A password in a store URL is never printed: by any command, in any output, from any
place in the URL (issue 30, point 5).

A secret is planted in each place a store URL carries one (:data:`POSITIONS`): a
PostgreSQL password in the userinfo, and one with a bad ``%`` escape (libpq quotes the
token it cannot decode); a Redis ``?password=`` and a Redis userinfo; the userinfo of an
``objects`` store's ``endpoint=``. Every command of :data:`savegame.cli.app.COMMANDS`
(each subcommand of a group too) then runs in a subprocess of its own over that URL,
once with ``--debug`` (tracebacks) and once with ``--json`` where it offers it, with
savegame's loggers at DEBUG on stderr; stdout and stderr are searched for the secret.
The web UI's pages are read through its test client, its log records kept at DEBUG.

The PostgreSQL and Redis positions open a real store (the test servers take any
password), holding a run paused for approval, so the commands print what they print
for real data: ``history``, ``export``, ``schedule list`` and ``migrate --to`` show the
store's URL, the UI shows it in every page's header. The other two fail at opening:
what is searched then is the error.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import savegame
from savegame.cli.app import COMMANDS, load
from savegame.redaction import redact, redact_url
from tests import services
from tests.adversarial import secret_flow

SECRET = "Hunter2Planted"
"""Letters and digits only: percent-encoding leaves it as it is, so any copy shows."""

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(savegame.__file__).resolve().parents[1]
FLOW = "tests.adversarial.secret_flow:wf"

# Runs the CLI as `savegame` does, with every savegame logger at DEBUG on stderr.
LOGGED_CLI = """
import logging, sys
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("log %(name)s %(levelname)s %(message)s"))
logger = logging.getLogger("savegame")
logger.addHandler(handler)
logger.setLevel(logging.DEBUG)
sys.argv = ["savegame", *sys.argv[1:]]
from savegame.cli import main
main()
"""


@dataclass(frozen=True)
class Planted:
    """A store URL holding :data:`SECRET`, and ids of what it holds (or stand-ins)."""

    url: str
    opens: bool
    given: str = SECRET
    """The password as the URL gives it (with its bad escape), as a driver may quote it."""
    run_id: str = "no-such-run"
    checkpoints: tuple[str, str] = ("no-such-checkpoint", "no-such-checkpoint-2")
    request_id: str = "no-such-effect"


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or 'postgres'}:{password}@{host}").geturl()


@contextmanager
def _postgres_userinfo(tmp: Path) -> Iterator[str]:
    with services.postgres_schema("sgsecret") as schema:
        yield services.with_query(_with_password(services.POSTGRES_URL, SECRET), schema=schema)


BAD_ESCAPE = f"{SECRET}%zz"


@contextmanager
def _postgres_bad_escape(tmp: Path) -> Iterator[str]:
    services.postgres_conninfo()  # skip-or-fail without the server, like the others
    yield _with_password(services.POSTGRES_URL, BAD_ESCAPE)


@contextmanager
def _redis_query(tmp: Path) -> Iterator[str]:
    with services.redis_prefix() as prefix:
        yield services.with_query(services.REDIS_URL, password=SECRET, prefix=prefix)


@contextmanager
def _redis_userinfo(tmp: Path) -> Iterator[str]:
    with services.redis_prefix() as prefix:
        parts = urlsplit(services.REDIS_URL)
        url = parts._replace(netloc=f":{SECRET}@{parts.netloc.rpartition('@')[2]}").geturl()
        yield services.with_query(url, prefix=prefix)


@contextmanager
def _objects_endpoint(tmp: Path) -> Iterator[str]:
    yield (
        f"sqlite:///{tmp / 'objects.db'}?objects=s3://bucket/runs"
        f"&endpoint=http://AKIDEXAMPLE:{SECRET}@127.0.0.1:9"
    )


#: Where a store URL carries a secret -> (a URL with SECRET there, whether it opens).
POSITIONS: dict[str, tuple[Callable[[Path], AbstractContextManager[str]], bool]] = {
    "postgres-userinfo": (_postgres_userinfo, True),
    "postgres-bad-escape": (_postgres_bad_escape, False),
    "redis-query": (_redis_query, True),
    "redis-userinfo": (_redis_userinfo, True),
    "objects-endpoint": (_objects_endpoint, False),
}


@pytest.fixture(params=list(POSITIONS))
def planted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Planted]:
    """A URL with the secret in one position; over a store holding a paused run when it opens."""
    make, opens = POSITIONS[request.param]
    with make(tmp_path) as url:
        if not opens:
            yield Planted(url, opens, BAD_ESCAPE if BAD_ESCAPE in url else SECRET)
            return
        logging.getLogger("savegame.stores.redis").disabled = True  # the test Redis has no AOF
        try:
            result = savegame.run(secret_flow.wf, {}, store=url)
            first, *_, last = savegame.client.history(result.run_id, store=url)
            (effect,) = savegame.client.list_effects(result.run_id, store=url)
        finally:
            logging.getLogger("savegame.stores.redis").disabled = False
        assert result.status.value == "interrupted"
        checkpoints = (last.checkpoint_id, first.checkpoint_id)
        yield Planted(url, opens, SECRET, result.run_id, checkpoints, effect.request_id)


# -- every command ----------------------------------------------------------------------
def _values(p: Planted, tmp: Path) -> dict[str, str]:
    """A value for each argument and required option of a command, by its name."""
    return {
        "workflow": FLOW,
        "flow": FLOW,
        "run_id": p.run_id,
        "ident": p.run_id,
        "targets": p.run_id,
        "a": p.checkpoints[0],
        "b": p.checkpoints[1],
        "checkpoint_id": p.checkpoints[0],
        "topic": "topic",
        "value": "1",
        "path": str(tmp / "export.sgx"),
        "name": "nightly",
        "source": str(tmp / "langgraph.db"),
        "--effect": p.request_id,
        "--reason": "no",
        "--against": FLOW,
        "--value": "1",
        "--output": str(tmp / "export.sgx"),
        "--cron": "0 * * * *",
        "--store": p.url,
        "--to": p.url,
    }


#: Options a command gets beyond its required ones, so it ends by itself.
EXTRA: dict[str, list[str]] = {
    "worker": ["--exit-when-idle", "0"],
    "demo": ["--no-keep"],
    "resolve": ["--done"],
    "prune": ["--keep-last", "1", "--dry-run"],
}


def _more(values: dict[str, str]) -> list[list[str]]:
    """Command lines beyond one per command: a migration's source with a secret too."""
    source = _with_password(services.POSTGRES_URL, SECRET)
    return [["migrate", "langgraph", source, "--to", values["--to"]]]


def _commands() -> list[tuple[list[str], Any]]:
    """(the words that name it, the click command) for every command and subcommand."""
    found: list[tuple[list[str], Any]] = []
    for module, names in COMMANDS.items():
        loaded = load(module)
        for name in names:
            command = loaded[name]
            subs = getattr(command, "commands", None)
            if subs:
                found += [([name, sub], subs[sub]) for sub in subs]
            else:
                found.append(([name], command))
    return found


def _argv(words: list[str], command: Any, values: dict[str, str]) -> tuple[list[str], bool]:
    """The command line for ``command``, and whether it offers ``--json``."""
    argv, offers_json = list(words), False
    for param in command.params:
        if param.param_type_name == "argument":
            assert param.name in values, f"give the argument {param.name} of {words} a value"
            argv.append(values[param.name])
            continue
        opts = set(param.opts)
        offers_json |= "--json" in opts
        for opt in opts & {"--store", "--to"}:
            argv += [opt, values[opt]]
        if param.required and not opts & {"--store", "--to"}:
            (opt,) = [o for o in param.opts if o.startswith("--")]
            assert opt in values, f"give the required option {opt} of {words} a value"
            argv += [opt, values[opt]]
        if "--yes" in opts:
            argv.append("--yes")
    return argv + EXTRA.get(words[0], []), offers_json


@dataclass
class Output:
    argv: list[str]
    code: int
    stdout: str
    stderr: str


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(ROOT)])
    env["COLUMNS"] = "250"  # one table row per line: a secret is never cut by a wrap
    return env


def _cli(argv: list[str], cwd: Path) -> Output:
    proc = subprocess.run(
        [sys.executable, "-c", LOGGED_CLI, *argv],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    return Output(argv, proc.returncode, proc.stdout, proc.stderr)


def _serve(argv: list[str], cwd: Path) -> Output:
    """``savegame ui``: served until it says where, then stopped with Ctrl-C."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOGGED_CLI, *argv, "--port", str(services._free_ports(1)[0])],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "savegame ui on ...", or nothing: it failed
    if first:
        proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    return Output(argv, proc.returncode, first + rest, err)


def _leaks(out: Output) -> list[str]:
    return [
        f"{' '.join(out.argv[:2])} (exit {out.code}) {stream}: {line.strip()}"
        for stream, text in (("stdout", out.stdout), ("stderr", out.stderr))
        for line in text.splitlines()
        if SECRET in line
    ]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_no_command_prints_a_secret_of_its_store_url(planted: Planted, tmp_path: Path) -> None:
    from tests.integrations.langgraph.migrate_graphs import sqlite_source

    values = _values(planted, tmp_path)
    sqlite_source(Path(values["source"]))  # a LangGraph file for `migrate` to move
    if planted.opens:  # an export file for `import` to read
        savegame.client.export_run(planted.run_id, values["path"], store=planted.url)
    lines: list[list[str]] = []
    for words, command in _commands():
        argv, offers_json = _argv(words, command, values)
        lines += [["--debug", *argv]] + ([[*argv, "--json"]] if offers_json else [])
    lines += [line for argv in _more(values) for line in (["--debug", *argv], [*argv, "--json"])]
    leaks: list[str] = []
    codes: dict[str, int] = {}
    for line in lines:
        out = _serve(line, tmp_path) if "ui" in line[:2] else _cli(line, tmp_path)
        leaks += _leaks(out)
        codes[" ".join(line[:3])] = out.code
    assert leaks == []
    if planted.opens:  # the secret URL worked: the commands saw the data
        assert codes[f"history {planted.run_id} --store"] == 0, codes


# -- the web UI ---------------------------------------------------------------------------
def test_no_ui_page_shows_a_secret_of_its_store_url(
    planted: Planted, caplog: pytest.LogCaptureFixture
) -> None:
    from starlette.testclient import TestClient

    from savegame.ui import create_app

    caplog.set_level(logging.DEBUG, logger="savegame")
    if not planted.opens:
        with pytest.raises(savegame.errors.ConfigurationError) as failed:
            create_app(planted.url)
        assert SECRET not in str(failed.value)
        assert SECRET not in caplog.text
        return
    app = create_app(planted.url, hosts=frozenset({"127.0.0.1"}))
    a, b = planted.checkpoints
    pages = [
        "/runs",
        f"/runs/{planted.run_id}",
        f"/runs?thread={planted.run_id}",
        f"/checkpoints/{a}",
        f"/diff?a={a}&b={b}",
        "/approvals",
        "/runs/no-such-run",
        "/checkpoints/no-such-checkpoint",
    ]
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        shown = {page: client.get(page) for page in pages}
    assert shown["/runs"].status_code == 200
    assert redact_url(planted.url).partition("?")[0] in shown["/runs"].text  # the header
    assert [page for page, response in shown.items() if SECRET in response.text] == []
    assert SECRET not in caplog.text


# -- the redaction itself -----------------------------------------------------------------
def test_every_position_is_redacted_in_the_url_and_in_a_message(planted: Planted) -> None:
    url = planted.url
    assert SECRET not in redact_url(url)
    assert SECRET not in redact(f"cannot open {url}: it said {planted.given!r}", url)
    # Quoted, as a message names a URL it refused, and given as --store=URL.
    assert SECRET not in redact(f"bad URL {url!r}", f"--store={url}")
    if planted.opens:
        store = savegame.open_store(url)
        try:
            assert store.url == redact_url(url)
            assert SECRET not in repr(store)
        finally:
            store.close()


@pytest.mark.parametrize(
    "objects",
    [
        "objects=s3://bucket/p&endpoint=http://key:pw@127.0.0.1:9",
        "objects=s3://bucket/p&endpoint=http://:pw@127.0.0.1:9",  # no user: was let through
        "objects=s3://key:pw@bucket/p",
        "objects=s3://:pw@bucket/p",
    ],
)
def test_credentials_in_an_objects_url_are_refused_and_said_so(
    objects: str, tmp_path: Path
) -> None:
    with pytest.raises(savegame.errors.ConfigurationError, match="holds credentials") as refused:
        savegame.open_store(f"sqlite:///{tmp_path / 's.db'}?{objects}")
    assert "pw" not in str(refused.value)
