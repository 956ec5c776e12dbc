"""Tests of the training-source augmentation (toy_augment.py). Needs sox."""

import os
import shutil
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import toy_audio  # noqa: E402
import toy_augment  # noqa: E402
from test_recorded_eval_set import recorded, tone  # noqa: E402


def plain(**changes):
    params = dict(speed=1.0, cents=0, bass_db=0.0, treble_db=0.0, reverb=0, noise_db=0.0,
                  noise_seed=1)
    params.update(changes)
    return params


class DrawTest(unittest.TestCase):
    def test_draws_are_reproducible_and_in_range(self):
        draws = [toy_augment.draw(1, "tr2spk", n, i) for n in range(1, 400) for i in range(2)]
        self.assertEqual(draws[:10], [toy_augment.draw(1, "tr2spk", n, i)
                                      for n in range(1, 6) for i in range(2)])
        self.assertNotEqual(draws[0], toy_augment.draw(2, "tr2spk", 1, 0))
        for d in draws:
            self.assertTrue(0.9 <= d["speed"] <= 1.1 and -200 <= d["cents"] <= 200)
            self.assertTrue(-6 <= d["bass_db"] <= 6 and -6 <= d["treble_db"] <= 6)
            self.assertTrue(d["reverb"] == 0 or 10 <= d["reverb"] <= 40)
            self.assertTrue(d["noise_db"] == 0 or 25 <= d["noise_db"] <= 40)
        self.assertAlmostEqual(np.mean([d["reverb"] > 0 for d in draws]), 0.25, delta=0.05)
        self.assertAlmostEqual(np.mean([d["noise_db"] > 0 for d in draws]), 0.5, delta=0.05)


@unittest.skipUnless(shutil.which("sox"), "needs sox")
class ApplyTest(unittest.TestCase):
    def setUp(self):
        self.voice = tone(120, 2.0).astype(np.int16)

    def test_speed_moves_pitch_and_length_together(self):
        out = toy_augment.apply(self.voice, plain(speed=1.1))
        self.assertAlmostEqual(len(out) / float(len(self.voice)), 1 / 1.1, delta=0.01)
        self.assertAlmostEqual(recorded.median_f0(out), 132, delta=3)

    def test_pitch_keeps_length(self):
        out = toy_augment.apply(self.voice, plain(cents=-200))
        self.assertAlmostEqual(len(out), len(self.voice), delta=80)
        self.assertAlmostEqual(recorded.median_f0(out), 120 * 2 ** (-2 / 12.0), delta=3)

    def test_noise_level_below_the_source(self):
        silent = np.zeros(16000, np.int16)
        silent[:8000] = self.voice[:8000]
        clean = toy_augment.apply(silent, plain())
        noisy = toy_augment.apply(silent, plain(noise_db=30.0))
        added = noisy.astype(np.float64) - clean
        ratio = 20 * np.log10(toy_audio.active_rms(clean) / np.sqrt(np.mean(added ** 2)))
        self.assertAlmostEqual(ratio, 30.0, delta=0.5)
        self.assertTrue(np.array_equal(noisy, toy_augment.apply(silent, plain(noise_db=30.0))))

    def test_treble_cut_removes_high_frequencies(self):
        def high_share(x):
            spectrum = np.abs(np.fft.rfft(x.astype(np.float64))) ** 2
            return spectrum[len(spectrum) // 2:].sum() / spectrum.sum()
        noise = (np.random.RandomState(2).randn(16000) * 2000).astype(np.int16)
        flat = high_share(toy_augment.apply(noise, plain()))
        self.assertLess(high_share(toy_augment.apply(noise, plain(treble_db=-6.0))), 0.8 * flat)
        self.assertGreater(high_share(toy_augment.apply(noise, plain(treble_db=6.0))), 1.2 * flat)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(shutil.which("sox") and shutil.which("espeak-ng"), "needs sox, espeak-ng")
class CorpusTest(unittest.TestCase):
    def test_augment_changes_training_mixtures_only(self):
        import filecmp
        import subprocess
        import tempfile
        script = os.path.join(os.path.dirname(HERE), "make_toy_corpus")
        sizes = ["--train=4", "--valid=2", "--test=2", "--train3=0", "--valid3=0", "--test3=0",
                 "--voices=espeak-ng"]
        with tempfile.TemporaryDirectory() as tmp:
            for name, extra in (("plain", []), ("augmented", ["--augment"])):
                done = subprocess.run([script, "--root=" + name] + sizes + extra, cwd=tmp,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True)
                self.assertEqual(done.returncode, 0, done.stdout)

            def same(split, n):
                path = os.path.join("2speakers", "wav8k", "min", split, "mix")
                names = sorted(os.listdir(os.path.join(tmp, "plain", path)))
                self.assertEqual(len(names), n)
                return [filecmp.cmp(os.path.join(tmp, "plain", path, f),
                                    os.path.join(tmp, "augmented", path, f), shallow=False)
                        for f in names]
            self.assertEqual(same("tt", 2), [True, True])
            self.assertEqual(same("tr", 4), [False] * 4)
            self.assertEqual(same("cv", 2), [False] * 2)
