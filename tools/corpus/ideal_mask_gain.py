#!/usr/bin/python3
"""How separable a generated set is: the mean SNR gain of the ideal binary mask.

    tools/corpus/ideal_mask_gain.py data/corpus/2speakers/wav8k/min/tt [N]

For the first N mixtures (default 30) of a set folder: STFT with the recipes' frames (256-sample
sine window, hop 64, i.e. 32/8 ms at 8 kHz), each bin given to the loudest source, inverse STFT by
overlap-add divided by the summed windows, then SNR(source, estimate) - SNR(source, mixture),
averaged over all sources. An upper bound for mask-based separation such as deep clustering.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import toy_audio  # noqa: E402
import toy_lists  # noqa: E402

FRAME, HOP = 256, 64
WINDOW = np.sin(np.pi * (np.arange(FRAME) + 0.5) / FRAME)


def stft(x):
    frames = [x[i:i + FRAME] * WINDOW for i in range(0, len(x) - FRAME + 1, HOP)]
    return np.fft.rfft(np.array(frames), axis=1)


def istft(spectrum, length):
    frames = np.fft.irfft(spectrum, n=FRAME, axis=1)
    out, weight = np.zeros(length), np.zeros(length)
    for k, frame in enumerate(frames):
        out[k * HOP:k * HOP + FRAME] += frame
        weight[k * HOP:k * HOP + FRAME] += WINDOW
    return out / (weight + 1e-15)


def snr(reference, estimate):
    return 10 * np.log10(np.sum(reference ** 2) / np.sum((reference - estimate) ** 2))


def main(argv):
    if len(argv) not in (1, 2) or (len(argv) == 2 and not argv[1].isdigit()):
        print("usage: " + __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    try:
        entries = toy_lists.read_lists(argv[0])[:int(argv[1]) if len(argv) == 2 else 30]
        gains = measure(entries)
    except toy_audio.CorpusError as error:
        print("ideal_mask_gain: error: %s" % error, file=sys.stderr)
        return 1
    if not gains:
        print("ideal_mask_gain: error: no mixtures in %s" % argv[0], file=sys.stderr)
        return 1
    print("ideal binary mask: mean SNR gain %.2f dB over %d sources of %d mixtures"
          % (np.mean(gains), len(gains), len(entries)))
    return 0


def measure(entries):
    gains = []
    for _, mix_path, source_paths in entries:
        mix = toy_audio.read_wav(mix_path)[0].astype(np.float64)
        sources = [toy_audio.read_wav(p)[0].astype(np.float64) for p in source_paths]
        mixture = stft(mix)
        loudest = np.argmax([np.abs(stft(s)) for s in sources], axis=0)
        length = (mixture.shape[0] - 1) * HOP + FRAME
        for index, source in enumerate(sources):
            estimate = istft(mixture * (loudest == index), length)
            gains.append(snr(source[:length], estimate) - snr(source[:length], mix[:length]))
    return gains


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
