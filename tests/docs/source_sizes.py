#!/usr/bin/env python3
"""Checks the sizes docs/architecture.md states: no library file (nabu/**/*.{h,cpp}) over the
file limit it names and no function over the function limit (tools/function_lengths), so the
page cannot fall behind the code. Prints each file or function over a limit; exits 1 if any."""
import argparse
import glob
import os
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args()
    page = open(os.path.join(args.root, "docs", "architecture.md")).read()
    stated = re.search(r"no library file over (\d+) lines and no function over (\d+)", page)
    if not stated:
        print("docs/architecture.md no longer states the file and function limits")
        return 1
    file_limit, function_limit = int(stated.group(1)), int(stated.group(2))
    failures = 0
    for path in sorted(glob.glob(os.path.join(args.root, "nabu", "**", "*.cpp"), recursive=True) +
                       glob.glob(os.path.join(args.root, "nabu", "**", "*.h"), recursive=True)):
        lines = open(path).read().count("\n")
        if lines > file_limit:
            print("%s: %d lines, over the %d docs/architecture.md states" %
                  (os.path.relpath(path, args.root), lines, file_limit))
            failures += 1
    listed = subprocess.run([sys.executable, os.path.join(args.root, "tools", "function_lengths"),
                             "--limit", str(function_limit), os.path.join(args.root, "nabu")],
                            stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    long_ones = [line for line in listed.splitlines() if not line.endswith("lines")]
    for line in long_ones:
        print("function over %d lines: %s" % (function_limit, line.strip()))
    failures += len(long_ones)
    print("%d file(s) over %d lines, %d function(s) over %d" %
          (failures - len(long_ones), file_limit, len(long_ones), function_limit))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
