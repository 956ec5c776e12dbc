#!/usr/bin/python3
"""The floors of nabu/ (docs/architecture.md, "Floors"): a file includes only headers of its own
floor or of floors below. Prints every include that runs up a floor and exits 1 when there is one;
prints the floors' file counts otherwise.

    tests/docs/include_floors.py [--root DIR]
"""
import argparse
import os
import re
import sys

# Folder prefix -> floor; the longest prefix that matches a file's path decides. Inside
# neuralnetworks/ the CPU kernels and precision lie below the models, the models below the
# losses, evaluators and trainers.
FLOORS = [
    ("core/", 1.0),
    ("processing/", 2.0), ("distributed/", 2.0),
    ("pipeline/", 3.0),
    ("neuralnetworks/kernels/", 4.0),
    ("neuralnetworks/", 4.1), ("neuralnetworks/models/", 4.1),
    ("neuralnetworks/loss_computers/", 4.2),
    ("neuralnetworks/evaluators/", 4.3),
    ("neuralnetworks/trainers/", 4.4),
    ("experiment/", 5.0),
    ("inference/", 6.0),
    ("evaluation/", 7.0), ("export/", 7.0),
    ("catalog/", 8.0), ("api/", 8.0), ("separator.h", 8.0),
    ("cli/", 9.0),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"nabu/([^"]+)"')


def floor_of(path):
    best = None
    for prefix, floor in FLOORS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, floor)
    return best


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args(argv)
    nabu = os.path.join(args.root, "nabu")
    problems, counts, unplaced = [], {}, []
    for folder, _, files in os.walk(nabu):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp")):
                continue
            path = os.path.relpath(os.path.join(folder, name), nabu)
            own = floor_of(path)
            if own is None:
                unplaced.append(path)
                continue
            counts[own[0]] = counts.get(own[0], 0) + 1
            with open(os.path.join(folder, name)) as f:
                for number, line in enumerate(f, 1):
                    match = INCLUDE.match(line)
                    if not match:
                        continue
                    target = floor_of(match.group(1))
                    if target is None:
                        unplaced.append(match.group(1))
                    elif target[1] > own[1]:
                        problems.append("nabu/%s:%d includes nabu/%s (floor %g above its %g)"
                                        % (path, number, match.group(1), target[1], own[1]))
    for path in sorted(set(unplaced)):
        problems.append("nabu/%s lies on no floor of tests/docs/include_floors.py" % path)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("%d files on %d floors, no include runs up: %s" % (
        sum(counts.values()), len(set(f for _, f in FLOORS)),
        ", ".join("%s %d" % (p, counts[p]) for p, _ in FLOORS if p in counts)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
