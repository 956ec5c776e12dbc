#!/usr/bin/python3
"""Every command README.md shows in a code block runs as written: each line that starts with
`./run`, `build/nabu` or `tools/demo` is run from the project root with `--help` added (which
parses every flag it names, so a renamed or misspelt option fails), except `nabu check`, which is
cheap and runs as it is, and `./run tests` / `./run demo`, which are what this suite is.

README.md keeps to 300 lines of at most 120 characters each, and names no issue ('issue N').

README's demo figures are what `./run demo` printed at the commit tests/docs/demo_figures.json
names; the recipe goldens (tests/recipes/golden/) move whenever the numerics do, so their
fingerprint is recorded beside it, and a change to them fails here until the demo is measured
again (or the figures are confirmed) and the record updated.

    tests/docs/readme_commands.py --nabu build/nabu [--readme README.md]
"""
import argparse
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIXES = ("./run", "build/nabu", "tools/demo")
MAX_LINES, MAX_WIDTH = 300, 120  # README stays a guide: at most this many lines, this wide


def code_block_commands(text):
    """(line number, command) of every line in a fenced code block that starts with a prefix;
    a trailing backslash joins the next line, a '#' comment is dropped."""
    commands, in_block, pending, start = [], False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        stripped = line.strip()
        if pending:
            pending += " " + stripped.rstrip("\\").strip()
        elif stripped.startswith(PREFIXES):
            pending, start = stripped.rstrip("\\").strip(), number
        else:
            continue
        if not stripped.endswith("\\"):
            commands.append((start, pending))
            pending = ""
    return commands


def to_run(words, nabu):
    """The argument list to run for a README command, or None when it is not run here."""
    program, rest = words[0], words[1:]
    if program == "tools/demo":
        return [os.path.join(ROOT, "tools", "demo")] + rest + ["--help"]
    if program == "./run" and (not rest or rest[0] in ("tests", "demo")):
        return None
    # Environment assignments before ./run (NABU_TORCH=wheel ./run ...) are not split off by
    # shlex; README writes them before the program, so they never reach here.
    if rest and rest[0] == "check":
        return [nabu] + rest
    return [nabu] + rest + ["--help"]


def goldens_fingerprint():
    """sha256 over the recipe goldens, in name order (name and content of each)."""
    digest = hashlib.sha256()
    folder = os.path.join(ROOT, "tests", "recipes", "golden")
    for name in sorted(os.listdir(folder)):
        digest.update(name.encode() + b"\0")
        with open(os.path.join(folder, name), "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def demo_figures_problems(text):
    """README names the commit its demo figures were measured at; the goldens are those of then."""
    path = os.path.join(ROOT, "tests", "docs", "demo_figures.json")
    with open(path) as handle:
        record = json.load(handle)
    problems = []
    if "`%s`" % record["commit"] not in text:
        problems.append("README.md does not name commit `%s`, at which its demo figures were "
                        "measured (%s)" % (record["commit"], path))
    now = goldens_fingerprint()
    if now != record["goldens_sha256"]:
        problems.append(
            "tests/recipes/golden/ changed since README's demo figures were measured at commit %s "
            "on %s: the numerics may have moved. Run ./run demo, put what it prints in README's "
            "table and docs/results.md (and check the model cards: ShippedModel.* tests), then "
            "record the commit and this fingerprint in %s: %s" % (
                record["commit"], record["cpu"], path, now))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nabu", required=True)
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    args = parser.parse_args()
    with open(args.readme, encoding="utf-8") as handle:
        text = handle.read()
    failures, ran = [], 0
    lines = text.splitlines()  # as `wc -l` counts them: a final newline starts no line
    if len(lines) > MAX_LINES:
        failures.append("README.md has %d lines; the guide keeps to %d" % (len(lines), MAX_LINES))
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_WIDTH:
            failures.append("README.md:%d is %d characters long; the guide keeps lines to %d (shorten "
                            "the prose or the table cell, and link to docs/ for the detail)" % (
                                number, len(line), MAX_WIDTH))
    if re.search(r"issue [0-9]", text, re.IGNORECASE):
        failures.append("README.md names an issue ('issue N'); results and history go to docs/")
    failures += demo_figures_problems(text)
    for number, command in code_block_commands(text):
        words = shlex.split(command, comments=True)
        argv = to_run(words, args.nabu)
        if argv is None:
            continue
        ran += 1
        result = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                universal_newlines=True, timeout=120)
        if result.returncode != 0:
            failures.append("README.md:%d: `%s` exited %d: %s" % (
                number, command, result.returncode, result.stdout.strip()[-400:]))
    for failure in failures:
        print(failure)
    print("README.md: %d command(s) run, %d problem(s)" % (ran, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
