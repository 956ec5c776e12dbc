#!/usr/bin/env python3
"""Reads an experiment's TensorBoard event files with TensorBoard's own reader (its
EventAccumulator, which verifies every record's CRC and drops what a resumed run trains again) and
checks that every number of every stage's metrics.jsonl is there as a scalar at its step, once,
with its value (as a 32-bit float), and nothing else is.

  read_events.py EXPDIR

Run by TensorBoard.ReaderFindsEveryMetricOnceAfterAResume (tests/unit/test_tensorboard.cpp) with
the test venv's python (./run tests makes it from tests/requirements.txt)."""
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def numbers(tag, value, out):
    """The numbers under a record's key, flattened as nabu names them (written out here again,
    independently of nabu's record_scalars)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            out[tag] = float(value)
    elif isinstance(value, dict):
        for key, child in value.items():
            numbers(tag + "/" + key, child, out)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            numbers(tag + "/" + str(index), child, out)


def expected_scalars(metrics_path):
    """(tag, step) -> value; a step logged twice (trained again after a resume) keeps its last."""
    expected = {}
    with open(metrics_path) as handle:
        for line in handle:
            record = json.loads(line)
            if not isinstance(record.get("step"), int):
                continue
            kind = record.get("type", "record")
            values = {}
            for key, value in record.items():
                if key not in ("type", "stage", "step"):
                    numbers(kind + "/" + key, value, values)
            if kind == "train" and isinstance(record.get("seconds"), (int, float)):
                values["train/seconds_per_update"] = float(record["seconds"])
                if record["seconds"] > 0 and isinstance(record.get("examples"), (int, float)):
                    values["train/examples_per_second"] = record["examples"] / record["seconds"]
            for tag, value in values.items():
                expected[(tag, record["step"])] = value
    return expected


def check_stage(expdir, stage):
    expected = expected_scalars(os.path.join(expdir, stage, "metrics.jsonl"))
    run = os.path.join(expdir, "tensorboard", stage)
    accumulator = event_accumulator.EventAccumulator(
        run, size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    problems = []
    found = {}
    for tag in accumulator.Tags()["scalars"]:
        steps = [event.step for event in accumulator.Scalars(tag)]
        if len(steps) != len(set(steps)):
            problems.append("%s: %s logged more than once at a step: %s" % (stage, tag, steps))
        for event in accumulator.Scalars(tag):
            found[(tag, event.step)] = event.value
    for key, value in sorted(expected.items()):
        if key not in found:
            problems.append("%s: %s at step %d is in metrics.jsonl, not in TensorBoard" %
                            (stage, key[0], key[1]))
        elif not math.isclose(found[key], value, rel_tol=1e-6, abs_tol=1e-30):
            problems.append("%s: %s at step %d is %r in TensorBoard, %r in metrics.jsonl" %
                            (stage, key[0], key[1], found[key], value))
    for key in sorted(set(found) - set(expected)):
        problems.append("%s: %s at step %d is in TensorBoard only" % (stage, key[0], key[1]))
    return len(expected), problems


def main():
    expdir = sys.argv[1]
    stages = sorted(name for name in os.listdir(expdir)
                    if os.path.exists(os.path.join(expdir, name, "metrics.jsonl")))
    if not stages:
        sys.exit("no stage with metrics.jsonl in " + expdir)
    problems, total = [], 0
    for stage in stages:
        count, stage_problems = check_stage(expdir, stage)
        total += count
        problems += stage_problems
    for problem in problems[:20]:
        print(problem)
    if problems:
        sys.exit("%d problems" % len(problems))
    print("%d scalars of %d stage(s) read back" % (total, len(stages)))


if __name__ == "__main__":
    main()
