"""Augmentation of the toy corpus's training sources (make_toy_corpus --augment): each time a
sentence enters a tr or cv mixture it is changed anew, so the model meets more voices than the
synthesisers have. tt is never augmented. Standard library + numpy + sox.

What is drawn per source, and why (real voices differ from synthetic ones in all of these):
  speed     0.90-1.10: sox `speed` resamples, so pitch, formants and tempo move together, like a
            longer or shorter vocal tract (vocal-tract-length perturbation)
  pitch     -200..+200 cents on top, formants kept (sox `pitch`)
  tilt      bass and treble shelves, each -6..+6 dB (microphones, rooms and voices differ in
            spectral tilt)
  reverb    in a quarter of the sources: a small room (sox `reverb`, reverberance 10-40 %)
  noise     in half of the sources: white noise 25-40 dB below the source's active level
"""

import os
import random
import tempfile

import numpy as np

import toy_audio

# Bump when the drawing or the effects change, so the corpus stamp changes with them.
AUGMENTATION_VERSION = 1


def draw(seed, split, mixture_number, source_index):
    """The augmentation of one source slot of one mixture: depends only on its identity."""
    rng = random.Random("%d:augment:%s:%d:%d" % (seed, split, mixture_number, source_index))
    return dict(
        speed=round(rng.uniform(0.90, 1.10), 4),
        cents=int(round(rng.uniform(-200, 200))),
        bass_db=round(rng.uniform(-6, 6), 2),
        treble_db=round(rng.uniform(-6, 6), 2),
        reverb=int(round(rng.uniform(10, 40))) if rng.random() < 0.25 else 0,
        noise_db=round(rng.uniform(25, 40), 2) if rng.random() < 0.5 else 0.0,
        noise_seed=rng.randrange(2 ** 31))


def sox_effects(params):
    effects = ["speed", "%.4f" % params["speed"], "pitch", str(params["cents"]),
               "bass", "%+.2f" % params["bass_db"], "treble", "%+.2f" % params["treble_db"]]
    if params["reverb"]:
        # reverberance, HF damping, room scale: a small, fairly damped room.
        effects += ["reverb", str(params["reverb"]), "50", "30"]
    return effects + ["rate", str(toy_audio.RATE)]


def apply(samples, params):
    """The augmented int16 samples (8 kHz) of one source."""
    with tempfile.TemporaryDirectory(prefix="toyaugment") as tmp:
        before, after = os.path.join(tmp, "in.wav"), os.path.join(tmp, "out.wav")
        toy_audio.write_wav(before, samples)
        # -R -D: deterministic; -G: no clipping (mix_sources rescales levels anyway).
        toy_audio.run(["sox", "-R", "-D", "-G", before, "-b", "16", after] + sox_effects(params))
        out, rate = toy_audio.read_wav(after)
    if rate != toy_audio.RATE:
        raise toy_audio.CorpusError("sox augmentation gave %d Hz" % rate)
    if params["noise_db"]:
        level = toy_audio.active_rms(out)
        noise = np.random.RandomState(params["noise_seed"]).randn(len(out))
        noisy = out.astype(np.float64) + noise * level * 10 ** (-params["noise_db"] / 20.0)
        out = np.clip(np.round(noisy), -32768, 32767).astype(np.int16)
    return out
