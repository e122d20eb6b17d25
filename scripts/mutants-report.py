#!/usr/bin/env python3
"""Scores cargo-mutants results per module (source file).

usage: mutants-report.py [--sample] DIR...   (each DIR holds mutants.out/)

A mutant is caught when a test failed or timed out with it in place. A missed
mutant listed in docs/testing.md's table of equivalent mutants (by file and
description, without line and column, which move as code changes) changes
no behaviour a test could see; it counts neither way. Exits 1 when a missed
mutant is not listed, or (unless --sample, which runs a shard) when a
module catches under 90% of the rest."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.90
# "| `gateway/src/auth/chunked.rs`: replace x with y in f | why |", a pipe in
# the description escaped as in Markdown ("replace \| with ^ in f").
LISTED = re.compile(r"^\|\s*`([^`]+\.rs)`:\s*((?:[^|\\]|\\.)+?)\s*\|")
# "gateway/src/auth/chunked.rs:12:5: replace x with y in f"
NAME = re.compile(r"^(?P<file>[^:]+\.rs):\d+:\d+:\s*(?P<what>.+)$")


def equivalents() -> set[tuple[str, str]]:
    text = (ROOT / "docs" / "testing.md").read_text()
    found = set()
    for line in text.splitlines():
        match = LISTED.match(line)
        if match:
            found.add((match.group(1), match.group(2).replace("\\|", "|")))
    return found


def mutant_name(outcome: dict) -> str | None:
    scenario = outcome["scenario"]
    if not isinstance(scenario, dict) or "Mutant" not in scenario:
        return None  # the unmutated baseline
    return scenario["Mutant"]["name"]


def outcomes_of(d: Path) -> list[dict]:
    """The latest outcome of each mutant tested in `d`: over every run kept in
    `d/history/` (a full run and the `--iterate` runs after it, oldest first),
    else over the last run and the one before it; only mutants of the code as
    it is now (`d/current.txt`, listed by scripts/mutants.sh) count."""
    runs = sorted((d / "history").glob("*.json"), key=lambda p: int(p.stem))
    if not runs:
        runs = [d / "mutants.out.old" / "outcomes.json", d / "mutants.out" / "outcomes.json"]
    latest: dict[str, tuple[int, dict]] = {}
    # The last run that tested each mutant by file and description: a mutant
    # whose line moved since an earlier run is named anew, and its earlier
    # name must not count as a mutant of its own.
    last_run: dict[tuple[str, str], int] = {}
    for index, run in enumerate(runs):
        if run.exists():
            for outcome in json.loads(run.read_text())["outcomes"]:
                name = mutant_name(outcome)
                if name is not None:
                    latest[name] = (index, outcome)
                    last_run[file_and_what(name)] = index
    current_list = d / "current.txt"
    current = set(current_list.read_text().splitlines()) if current_list.exists() else None
    return [
        outcome
        for index, outcome in latest.values()
        if index == last_run[file_and_what(mutant_name(outcome))]
        and (current is None or mutant_name(outcome) in current)
    ]


def file_and_what(name: str) -> tuple[str, str]:
    match = NAME.match(name)
    return match.group("file"), match.group("what")

def main(argv: list[str]) -> int:
    sample = "--sample" in argv
    dirs = [Path(a) for a in argv if a != "--sample"]
    listed = equivalents()
    per_file: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    unlisted = []
    for d in dirs:
        for outcome in outcomes_of(d):
            name = mutant_name(outcome)
            if name is None:
                continue
            match = NAME.match(name)
            file, what = match.group("file"), match.group("what")
            summary = outcome["summary"]
            counts = per_file[file]
            if summary == "CaughtMutant":
                counts["caught"] += 1
            elif summary == "Timeout":
                counts["timeout"] += 1
            elif summary == "MissedMutant":
                if (file, what) in listed:
                    counts["equivalent"] += 1
                else:
                    counts["missed"] += 1
                    unlisted.append(f"{file}: {what}")
            else:
                counts["unviable"] += 1
    failed = False
    print(f"{'module':<48} {'caught':>6} {'timeout':>7} {'missed':>6} {'equiv':>5} {'unviable':>8} {'score':>6}")
    for file in sorted(per_file):
        c = per_file[file]
        detected = c["caught"] + c["timeout"]
        judged = detected + c["missed"]
        score = detected / judged if judged else 1.0
        low = not sample and score < TARGET
        failed |= low
        print(
            f"{file:<48} {c['caught']:>6} {c['timeout']:>7} {c['missed']:>6} {c['equivalent']:>5} "
            f"{c['unviable']:>8} {score:>6.1%}{'  < 90%' if low else ''}"
        )
    if unlisted:
        failed = True
        print("\nmissed, with no test and not listed as equivalent in docs/testing.md:")
        for line in unlisted:
            print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
