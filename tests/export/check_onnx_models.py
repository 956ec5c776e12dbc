#!/usr/bin/env python3
"""Runs small ONNX models of single Nabu models (tests/unit/test_export.cpp,
ModelExport.FrameModelsInOnnxRuntime...) in onnxruntime against the outputs LibTorch gave.

    check_onnx_models.py MANIFEST

Each MANIFEST line: MODEL.onnx INPUT.f32 INPUT_SHAPE EXPECTED.f32 EXPECTED_SHAPE (shapes as
comma-separated sizes). Every output must be within 1e-5 + 1e-4 |expected| of LibTorch's.
"""
import sys

import numpy as np
import onnx
import onnxruntime


def shape(text):
    return tuple(int(size) for size in text.split(","))


def main():
    failed = 0
    for line in open(sys.argv[1]):
        model_path, input_path, input_shape, expected_path, expected_shape = line.split()
        onnx.checker.check_model(onnx.load(model_path), full_check=True)
        session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        x = np.fromfile(input_path, dtype=np.float32).reshape(shape(input_shape))
        expected = np.fromfile(expected_path, dtype=np.float32).reshape(shape(expected_shape))
        output = session.run(["y"], {"x": x})[0]
        worst = float(np.max(np.abs(output - expected))) if output.shape == expected.shape else None
        ok = worst is not None and np.allclose(output, expected, rtol=1e-4, atol=1e-5)
        print(f"{model_path}: output {output.shape}, largest difference {worst}")
        failed += 0 if ok else 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
