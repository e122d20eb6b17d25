#!/usr/bin/env python3
"""Checks the crate map of docs/architecture.md against the workspace.

Every workspace crate has one row of the table (`| crate | folder | its one
job | depends on |`), in its folder, naming exactly the workspace crates it
depends on (normal dependencies; `-` for none) as `cargo metadata` reads
them from the manifests. Exits 1 naming each difference. `--self-test`
checks that a planted difference is found.

Usage: scripts/crate-map.py [--self-test]
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
HEADER = "| crate | folder | its one job | depends on |"


def workspace():
    """crate -> (folder, the workspace crates it depends on)."""
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--locked"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    names = {p["name"] for p in metadata["packages"]}
    out = {}
    for package in metadata["packages"]:
        folder = os.path.relpath(os.path.dirname(package["manifest_path"]), metadata["workspace_root"])
        deps = {d["name"] for d in package["dependencies"] if d["name"] in names and d.get("kind") is None}
        out[package["name"]] = (folder, deps)
    return out


def documented(text):
    """crate -> (folder, dependencies) from the table after HEADER."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2
    out = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        crate, folder, deps = cells[0].strip("`"), cells[1].strip("`"), cells[3]
        named = set() if deps == "-" else {d.strip().strip("`") for d in deps.split(",")}
        out[crate] = (folder, named)
    return out


def differences(actual, doc):
    found = []
    for crate in sorted(actual.keys() - doc.keys()):
        found.append(f"{crate}: no row in the crate map")
    for crate in sorted(doc.keys() - actual.keys()):
        found.append(f"{crate}: a row, but no such crate in the workspace")
    for crate in sorted(actual.keys() & doc.keys()):
        (folder, deps), (doc_folder, doc_deps) = actual[crate], doc[crate]
        if folder != doc_folder:
            found.append(f"{crate}: folder {folder}, the map says {doc_folder}")
        if deps != doc_deps:
            missing, extra = sorted(deps - doc_deps), sorted(doc_deps - deps)
            found.append(f"{crate}: depends on {sorted(deps)}; the map misses {missing} and adds {extra}")
    return found


def self_test(actual):
    planted = dict(actual)
    crate = sorted(c for c, (_, deps) in actual.items() if deps)[0]
    folder, deps = actual[crate]
    planted[crate] = (folder, set(sorted(deps)[1:]))
    found = differences(actual, planted)
    assert len(found) == 1 and found[0].startswith(f"{crate}:"), found
    print(f"crate-map self-test: a dependency left out of {crate}'s row is found")


def main():
    actual = workspace()
    if sys.argv[1:] == ["--self-test"]:
        self_test(actual)
        return
    with open(DOC) as f:
        found = differences(actual, documented(f.read()))
    for line in found:
        print(f"docs/architecture.md crate map: {line}")
    if not found:
        print(f"crate map matches the workspace ({len(actual)} crates)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
