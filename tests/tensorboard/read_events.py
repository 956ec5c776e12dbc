#!/usr/bin/env python3
"""Reads an experiment's TensorBoard event files with TensorBoard's own reader (its
EventAccumulator, which verifies every record's CRC and drops what a resumed run trains again) and
checks that every number of every stage's metrics.jsonl is there as a scalar at its step, once,
with its value (as a 32-bit float), and nothing else is; with log_norms (norms in the update
records), that every parameter has a histogram at every validation, once, and with
--histogram-steps N (trainer.cfg's histogram_steps) every N updates too; with --audio N
(validation_evaluator.cfg's tensorboard_audio = N), that every validation has the separated
signals of N utterances, and the first one their references, as WAV files of the data's rate.

  read_events.py EXPDIR [--audio N] [--histogram-steps N]

Run by TensorBoard.ReaderFindsEveryMetricOnceAfterAResume (tests/unit/test_tensorboard.cpp) with
the test venv's python (./run tests makes it from tests/requirements.txt)."""
import io
import json
import math
import os
import sys
import wave

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


def read_records(metrics_path):
    with open(metrics_path) as handle:
        return [json.loads(line) for line in handle]


def expected_scalars(records):
    """(tag, step) -> value; a step logged twice (trained again after a resume) keeps its last."""
    expected = {}
    for record in records:
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


def check_histograms(stage, records, accumulator, every):
    """Every parameter's histogram once at each step where one is due: every validation with
    log_norms (norms in the update records), every `every`-th update with histogram_steps."""
    due = set()
    if any("norms" in record for record in records if record.get("type") == "train"):
        due |= {record["step"] for record in records if record.get("type") == "validation"}
    if every > 0:
        due |= {record["step"] for record in records
                if record.get("type") == "train" and record["step"] % every == 0}
    validations = sorted(due)
    tags = accumulator.Tags()["histograms"]
    if not validations:
        return ["%s: histograms %s, none due" % (stage, tags)] if tags else []
    if not tags:
        return ["%s: histograms due at %s but TensorBoard has none" % (stage, validations)]
    problems = []
    for tag in tags:
        events = accumulator.Histograms(tag)
        steps = [event.step for event in events]
        if sorted(steps) != validations:
            problems.append("%s: histogram %s at steps %s, due at %s" %
                            (stage, tag, steps, validations))
        for event in events:
            value = event.histogram_value
            if value.num <= 0 or sum(value.bucket) != value.num or value.min > value.max:
                problems.append("%s: histogram %s at step %d is inconsistent" %
                                (stage, tag, event.step))
    return problems


def check_audio(stage, records, accumulator, utterances):
    """Every validation step: the separated signals of `utterances` utterances (tags
    audio/<task>/<utterance>/separated_<k>), the first validation also their references; each a
    mono 16-bit WAV of the data's rate and of the length the event states."""
    validations = sorted({record["step"] for record in records
                          if record.get("type") == "validation"})
    tags = accumulator.Tags()["audio"]
    problems = []
    separated = [tag for tag in tags if "/separated_" in tag]
    references = [tag for tag in tags if "/reference_" in tag]
    utterances_seen = {tag.rsplit("/", 1)[0] for tag in separated}
    if len(utterances_seen) != utterances:
        problems.append("%s: audio of %d utterance(s), tensorboard_audio asks %d" %
                        (stage, len(utterances_seen), utterances))
    if not references:
        problems.append("%s: no reference audio" % stage)
    for tag in separated + references:
        events = accumulator.Audio(tag)
        steps = sorted(event.step for event in events)
        wanted = validations if tag in separated else validations[:1]
        if steps != wanted:
            problems.append("%s: audio %s at steps %s, wanted %s" % (stage, tag, steps, wanted))
        for event in events:
            with wave.open(io.BytesIO(event.encoded_audio_string)) as wav:
                if (wav.getnchannels() != 1 or wav.getsampwidth() != 2 or
                        wav.getframerate() != int(event.sample_rate) or
                        wav.getnframes() != event.length_frames or event.length_frames < 800):
                    problems.append("%s: audio %s at step %d: %d channel(s), %d bytes, %d Hz, "
                                    "%d frames (event: %g Hz, %d frames)" % (
                                        stage, tag, event.step, wav.getnchannels(),
                                        wav.getsampwidth(), wav.getframerate(),
                                        wav.getnframes(), event.sample_rate,
                                        event.length_frames))
    return problems


def check_stage(expdir, stage, audio_utterances, histogram_steps):
    records = read_records(os.path.join(expdir, stage, "metrics.jsonl"))
    expected = expected_scalars(records)
    run = os.path.join(expdir, "tensorboard", stage)
    accumulator = event_accumulator.EventAccumulator(
        run, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
                            event_accumulator.AUDIO: 0})
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
    problems += check_histograms(stage, records, accumulator, histogram_steps)
    if audio_utterances:
        problems += check_audio(stage, records, accumulator, audio_utterances)
    elif accumulator.Tags()["audio"]:
        problems.append("%s: audio without tensorboard_audio" % stage)
    return len(expected), problems


def main():
    expdir = sys.argv[1]
    flags = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    audio_utterances = int(flags.get("--audio", 0))
    histogram_steps = int(flags.get("--histogram-steps", 0))
    stages = sorted(name for name in os.listdir(expdir)
                    if os.path.exists(os.path.join(expdir, name, "metrics.jsonl")))
    if not stages:
        sys.exit("no stage with metrics.jsonl in " + expdir)
    problems, total = [], 0
    for stage in stages:
        count, stage_problems = check_stage(expdir, stage, audio_utterances, histogram_steps)
        total += count
        problems += stage_problems
    for problem in problems[:20]:
        print(problem)
    if problems:
        sys.exit("%d problems" % len(problems))
    print("%d scalars of %d stage(s) read back" % (total, len(stages)))


if __name__ == "__main__":
    main()
