#!/usr/bin/env python3
"""Checks a file `nabu export --format=onnx` wrote with the ONNX reference tools: onnx.checker
accepts it (full check, shape inference included), and onnxruntime's output for each mixture
equals nabu's within 1e-4 of the output's RMS; a batch of a mixture and half of it gives each
as alone.

    check_onnx.py MODEL.onnx SPEAKERS MIXTURE.f32 EXPECTED.f32 [MIXTURE.f32 EXPECTED.f32 ...]

MIXTURE: float32 samples; EXPECTED: float32 [SPEAKERS, samples] (what nabu separate wrote).
"""
import sys

import numpy as np
import onnx
import onnxruntime

TOLERANCE = 1e-4


def main():
    path, speakers = sys.argv[1], int(sys.argv[2])
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opsets = {entry.domain or "ai.onnx": entry.version for entry in model.opset_import}
    print(f"{path}: onnx.checker accepts it (IR {model.ir_version}, opsets {opsets})")
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for mixture_path, expected_path in zip(sys.argv[3::2], sys.argv[4::2]):
        mixture = np.fromfile(mixture_path, dtype=np.float32)
        expected = np.fromfile(expected_path, dtype=np.float32).reshape(speakers, -1)
        output = session.run(["separated"], {"waveform": mixture[None, :]})[0]
        if output.shape != (1, speakers, mixture.size):
            sys.exit(f"{mixture_path}: output of shape {output.shape}, expected "
                     f"(1, {speakers}, {mixture.size})")
        rms = float(np.sqrt(np.mean(expected.astype(np.float64) ** 2)))
        error = float(np.max(np.abs(output[0] - expected))) / rms
        print(f"{mixture_path}: {mixture.size} samples, largest difference / RMS {error:.2e}")
        worst = max(worst, error)
        # A batch separates each signal as alone (a mask model's features are not scale-free).
        half = session.run(["separated"], {"waveform": 0.5 * mixture[None, :]})[0]
        batch = session.run(["separated"], {"waveform": np.stack([mixture, 0.5 * mixture])})[0]
        if not (np.allclose(batch[0], output[0], rtol=1e-4, atol=1e-2 * rms) and
                np.allclose(batch[1], half[0], rtol=1e-4, atol=1e-2 * rms)):
            sys.exit(f"{mixture_path}: a batch of the mixture and half of it does not give both")
    if worst > TOLERANCE:
        sys.exit(f"largest difference / RMS {worst:.2e} > {TOLERANCE}")


if __name__ == "__main__":
    main()
