"""Start-up (issue 19, point 4): what a fresh process pays before savegame does anything.

Each command runs in a new interpreter, the rounds interleaved (pass, import savegame,
from savegame import ..., savegame --help, import langgraph, ...) so a machine that
gets busier mid-run slows every row alike; the table shows medians and the ratios the
targets are stated in: to ``python -c pass`` (the interpreter's own start, the floor)
and to ``import langgraph.graph`` (what a LangGraph user pays today), both from this run.

``import savegame`` imports none of savegame's packages (their names are read lazily);
``from savegame import Workflow, run`` is what a user's script pays before its first
run: the runtime, the codec, the stores. ``-X importtime`` of it is summarised last:
the ten modules with the largest own time, so a regression names its module.

    python benchmarks/startup.py
    python benchmarks/startup.py --repeat 30
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from workload import machine, markdown, version

# The targets, measured on a machine where `python -c pass` took 11 ms:
# 100 ms for the import and 150 ms for --help, i.e. 9x and 13.6x the floor.
IMPORT_TARGET_FLOOR = 9.0
HELP_TARGET_FLOOR = 13.6
IMPORT_TARGET_LANGGRAPH = 0.2

#: What a user's script imports before its first run (no target of its own).
SCRIPT_IMPORT = "from savegame import Workflow, run"


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    argv: list[str]


COMMANDS = [
    Command("python -c pass", [sys.executable, "-c", "pass"]),
    Command("import savegame", [sys.executable, "-c", "import savegame"]),
    Command(SCRIPT_IMPORT, [sys.executable, "-c", SCRIPT_IMPORT]),
    Command("savegame --help", [sys.executable, "-m", "savegame", "--help"]),
    Command("import langgraph.graph", [sys.executable, "-c", "import langgraph.graph"]),
]


def once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def medians(commands: Sequence[Command], repeat: int) -> dict[str, float]:
    for command in commands:  # warm the page cache and the .pyc files
        once(command.argv)
    times: dict[str, list[float]] = {c.name: [] for c in commands}
    for _ in range(repeat):
        for command in commands:
            times[command.name].append(once(command.argv))
    return {name: statistics.median(values) * 1e3 for name, values in times.items()}


def heaviest_imports(count: int = 10) -> list[tuple[str, float]]:
    """The modules with the largest own (self) import time under ``-X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", SCRIPT_IMPORT],
        check=True,
        capture_output=True,
        text=True,
    )
    rows: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), int(self_us) / 1e3))
    return sorted(rows, key=lambda row: row[1], reverse=True)[:count]


def verdict(ratio: float, target: float, *, at_most: bool = True) -> str:
    return "met" if (ratio <= target if at_most else ratio >= target) else "missed"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)

    print(machine(f"langgraph {version('langgraph')}"), "\n")
    print(f"fresh processes, {args.repeat} interleaved rounds, median wall ms", file=sys.stderr)
    ms = medians(COMMANDS, args.repeat)
    floor = ms["python -c pass"]
    langgraph = ms["import langgraph.graph"]
    print(
        markdown(
            ["command", "median ms", "x python -c pass", "x import langgraph.graph"],
            [
                [name, f"{value:.1f}", f"{value / floor:.2f}", f"{value / langgraph:.2f}"]
                for name, value in ms.items()
            ],
            numeric_from=1,
        )
    )
    imported = ms["import savegame"]
    helped = ms["savegame --help"]
    print()
    print(
        markdown(
            ["target", "measured", "target ratio", ""],
            [
                [
                    "import savegame / python -c pass",
                    f"{imported / floor:.2f}",
                    f"<= {IMPORT_TARGET_FLOOR}",
                    verdict(imported / floor, IMPORT_TARGET_FLOOR),
                ],
                [
                    "import savegame / import langgraph.graph",
                    f"{imported / langgraph:.2f}",
                    f"<= {IMPORT_TARGET_LANGGRAPH}",
                    verdict(imported / langgraph, IMPORT_TARGET_LANGGRAPH),
                ],
                [
                    "savegame --help / python -c pass",
                    f"{helped / floor:.2f}",
                    f"<= {HELP_TARGET_FLOOR}",
                    verdict(helped / floor, HELP_TARGET_FLOOR),
                ],
            ],
            numeric_from=1,
        )
    )
    print(f"\n`{SCRIPT_IMPORT}`, heaviest modules by their own import time (-X importtime):\n")
    print(
        markdown(
            ["module", "self ms"],
            [[name, f"{value:.1f}"] for name, value in heaviest_imports()],
            numeric_from=1,
        )
    )


if __name__ == "__main__":
    main()
