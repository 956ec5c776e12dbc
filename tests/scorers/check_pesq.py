#!/usr/bin/env python3
"""Checks nabu's PESQ against the `pesq` package (the ITU-T P.862 / P.862.2 reference
implementation wrapped for Python).

  check_pesq.py PAIRS_JSON

PAIRS_JSON (written by Pesq.MatchesThePesqPackageOnRecordedAndGeneratedSpeech,
tests/unit/test_pesq.cpp): [{"reference": wav, "degraded": wav, "mode": "nb" | "wb",
"pesq": nabu's MOS-LQO}, ...]. Every value must be within 0.05 MOS of the package's on the same
files. Run with the test venv's python (./run tests makes it from tests/requirements.txt)."""
import json
import sys

import numpy as np
from pesq import pesq
from scipy.io import wavfile

TOLERANCE = 0.05


def read(path):
    rate, samples = wavfile.read(path)
    return rate, samples.astype(np.float64)


def main():
    pairs = json.load(open(sys.argv[1]))
    worst = {"nb": 0.0, "wb": 0.0}
    differences = []
    failures = []
    for pair in pairs:
        rate, reference = read(pair["reference"])
        degraded_rate, degraded = read(pair["degraded"])
        assert rate == degraded_rate, pair
        expected = pesq(rate, reference, degraded, pair["mode"])
        difference = abs(expected - pair["pesq"])
        differences.append(difference)
        worst[pair["mode"]] = max(worst[pair["mode"]], difference)
        if difference > TOLERANCE:
            failures.append("%s (%s): nabu %.4f, pesq %.4f" % (
                pair["degraded"], pair["mode"], pair["pesq"], expected))
        if "-v" in sys.argv:
            print("%-60s %s nabu %.4f pesq %.4f" % (pair["degraded"].split("/")[-1],
                                                     pair["mode"], pair["pesq"], expected))
    for failure in failures:
        print(failure)
    print("%d pairs; difference from the pesq package: largest narrow band %.4f, wide band "
          "%.4f; median %.4f MOS" % (len(pairs), worst["nb"], worst["wb"],
                                     float(np.median(differences))))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
