#!/usr/bin/python3
"""Loads a file `nabu export` wrote with Python's torch.jit.load (Debian's python3-torch) and
checks that it separates a mixture as nabu does.

  check_torchscript.py MODULE MIXTURE EXPECTED SPEAKERS

MIXTURE: the mixture as raw float32 samples; EXPECTED: nabu's separation of it, [SPEAKERS, N] raw
float32 (written by TrainingRun.ExportedConvTasNetSeparatesAsNabuSeparate, tests/unit/
test_export.cpp, which checks it against nabu separate). Every output must be within 1e-4 of
the expected one's RMS."""
import sys

import numpy as np
import torch


def main():
    module_path, mixture_path, expected_path, speakers = sys.argv[1:5]
    module = torch.jit.load(module_path)
    mixture = np.fromfile(mixture_path, dtype=np.float32)
    expected = np.fromfile(expected_path, dtype=np.float32).reshape(int(speakers), -1)
    with torch.no_grad():
        output = module(torch.from_numpy(mixture)).numpy()
    if output.shape != (1,) + expected.shape:
        sys.exit("shape %s, expected %s" % (output.shape, (1,) + expected.shape))
    worst = 0.0
    for speaker in range(expected.shape[0]):
        rms = np.sqrt(np.mean(expected[speaker].astype(np.float64) ** 2))
        worst = max(worst, np.max(np.abs(output[0, speaker] - expected[speaker])) / rms)
    print("torch %s, sample_rate %d, %d speakers: largest difference / RMS %.2e" % (
        torch.__version__, module.sample_rate, module.speakers, worst))
    sys.exit(1 if worst > 1e-4 else 0)


if __name__ == "__main__":
    main()
