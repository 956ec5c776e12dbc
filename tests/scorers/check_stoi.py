#!/usr/bin/env python3
"""Checks nabu's STOI and ESTOI against pystoi, the reference Python implementation of Taal et
al. 2011 and Jensen & Taal 2016.

  check_stoi.py PAIRS_JSON

PAIRS_JSON (written by Stoi.MatchesPystoiOnRecordedAndGeneratedSpeech, tests/unit/test_stoi.cpp):
[{"clean": wav, "processed": wav, "stoi": nabu's value, "estoi": nabu's value}, ...]. Every value
must be within 1e-3 of pystoi's on the same files. Run with the test venv's python (./run tests
makes it from tests/requirements.txt)."""
import json
import sys

import numpy as np
from pystoi import stoi
from scipy.io import wavfile

TOLERANCE = 1e-3


def read(path):
    rate, samples = wavfile.read(path)
    return rate, samples.astype(np.float64)


def main():
    pairs = json.load(open(sys.argv[1]))
    worst = {"stoi": 0.0, "estoi": 0.0}
    failures = []
    for pair in pairs:
        rate, clean = read(pair["clean"])
        processed_rate, processed = read(pair["processed"])
        assert rate == processed_rate, pair
        for metric, extended in (("stoi", False), ("estoi", True)):
            reference = stoi(clean, processed, rate, extended=extended)
            difference = abs(reference - pair[metric])
            worst[metric] = max(worst[metric], difference)
            if difference > TOLERANCE:
                failures.append("%s %s: nabu %.5f, pystoi %.5f" % (
                    pair["processed"], metric, pair[metric], reference))
    for failure in failures:
        print(failure)
    print("%d pairs; largest difference from pystoi: STOI %.2e, ESTOI %.2e" % (
        len(pairs), worst["stoi"], worst["estoi"]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
