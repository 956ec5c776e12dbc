"""Tests of tools/make_noisy_corpus on a small hand-made corpus (no synthesis needed).
Run: /usr/bin/python3 -m unittest discover -s tools/corpus
"""

import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import toy_audio  # noqa: E402
import toy_lists  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(HERE), "make_noisy_corpus")
SPEAKERS = ["a", "b", "c", "d", "e", "f", "g"]


def make_corpus(work):
    """A corpus laid out like tools/make_toy_corpus's: per split, sentences of seven speakers
    (tones of their own pitch) and 2-speaker mixtures of them, paths relative to `work`."""
    rng = np.random.RandomState(5)
    for split, mixtures in (("tr", 5), ("cv", 2), ("tt", 2)):
        wav_lines, spk_lines, sentences = [], [], []
        for k, speaker in enumerate(SPEAKERS):
            for n in range(2):
                name = "%s_%s%d" % (split, speaker, n)
                path = "corpus/sources/%s/%s.wav" % (speaker, name)
                os.makedirs(os.path.join(work, os.path.dirname(path)), exist_ok=True)
                t = np.arange(rng.randint(8000, 16000)) / 8000.0
                x = 8000 * np.sin(2 * np.pi * (150 + 40 * k) * t) * (0.6 + 0.4 * np.sin(3 * t))
                toy_audio.write_wav(os.path.join(work, path), x.astype(np.int16))
                wav_lines.append("%s %s\n" % (name, path))
                spk_lines.append("%s %s\n" % (name, speaker))
                sentences.append((path, speaker))
        toy_lists.write_text(os.path.join(work, "corpus/sources/%s_wav.scp" % split), "".join(wav_lines))
        toy_lists.write_text(os.path.join(work, "corpus/sources/%s_utt2spk" % split), "".join(spk_lines))
        folder = "corpus/2speakers/wav8k/min/" + split
        for sub in ("mix", "s1", "s2"):
            os.makedirs(os.path.join(work, folder, sub), exist_ok=True)
        entries = []
        for m in range(mixtures):
            (p1, k1), (p2, k2) = sentences[2 * m], sentences[2 * m + 3]
            x1, _ = toy_audio.read_wav(os.path.join(work, p1))
            x2, _ = toy_audio.read_wav(os.path.join(work, p2))
            mix, (s1, s2) = toy_audio.mix_sources([x1, x2], [0.0, 0.0])
            name = "%s_%d_%s_%s" % (split, m, k1, k2)
            paths = ["%s/%s/%s.wav" % (folder, sub, name) for sub in ("mix", "s1", "s2")]
            for path, samples in zip(paths, (mix, s1, s2)):
                toy_audio.write_wav(os.path.join(work, path), samples)
            entries.append((name, paths[0], paths[1:], [(k1, "M"), (k2, "F")]))
        toy_lists.write_lists(os.path.join(work, folder), entries)
    toy_lists.write_text(os.path.join(work, "corpus/.complete"), '{"format": "hand-made"}\n')


class NoisyCorpusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp()
        make_corpus(cls.work)
        cls.out = os.path.join(cls.work, "corpus/2speakers_babble/wav8k/min")
        cls.first = cls.run_script("--train=3", "--snr", "2", "6")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work)

    @classmethod
    def run_script(cls, *args):
        return subprocess.run([sys.executable, SCRIPT, "--root=corpus"] + list(args), cwd=cls.work,
                              capture_output=True, text=True)

    def read(self, path):
        return toy_audio.read_wav(os.path.join(self.work, path))[0].astype(np.int64)

    def lines(self, split, name):
        with open(os.path.join(self.out, split, name)) as f:
            return [line.split() for line in f]

    def test_noisy_mixture_is_sources_plus_noise_at_the_asked_level(self):
        self.assertEqual(self.first.returncode, 0, self.first.stderr)
        self.assertIn("tr 3, cv 2, tt 2", self.first.stdout)
        for split in ("tr", "cv", "tt"):
            mixes, sources, noises = (self.lines(split, n) for n in
                                      ("mix_wav.scp", "allS_wav.scp", "noise_wav.scp"))
            self.assertEqual([m[0] for m in mixes], [n[0] for n in noises])
            for mix, src, noise in zip(mixes, sources, noises):
                m, s1, s2, z = self.read(mix[1]), self.read(src[1]), self.read(src[2]), self.read(noise[1])
                self.assertTrue(np.array_equal(m, s1 + s2 + z))
                self.assertLessEqual(np.abs(m).max(), 29491 + 3)
                snr = 20 * np.log10(toy_audio.active_rms((s1 + s2).astype(float)) /
                                    toy_audio.active_rms(z.astype(float)))
                self.assertGreater(snr, 2 - 0.3)
                self.assertLess(snr, 6 + 0.3)
        info = self.lines("tt", "utt_spkinfo.txt")
        self.assertEqual(info[0][2:], ["a", "M", "b", "F"])

    def test_deterministic_and_up_to_date(self):
        again = self.run_script("--train=3", "--snr", "2", "6")
        self.assertIn("up to date", again.stdout)
        copy = os.path.join(self.work, "first")
        shutil.copytree(self.out, copy)
        rerun = self.run_script("--train=3", "--snr", "2", "6.0001")
        self.assertEqual(rerun.returncode, 0, rerun.stderr)
        rerun = self.run_script("--train=3", "--snr", "2", "6")
        self.assertEqual(rerun.returncode, 0, rerun.stderr)
        name = self.lines("cv", "noise_wav.scp")[1][1]
        # A regenerated clean corpus (another stamp) is a reason to make the noisy one again.
        stamp = os.path.join(self.work, "corpus/.complete")
        with open(stamp) as f:
            original = f.read()
        toy_lists.write_text(stamp, '{"format": "other"}\n')
        self.assertIn("noisy corpus in", self.run_script("--train=3", "--snr", "2", "6").stdout)
        toy_lists.write_text(stamp, original)
        self.run_script("--train=3", "--snr", "2", "6")
        self.assertTrue(filecmp.cmp(os.path.join(self.work, name),
                                    os.path.join(copy, "cv/noise", os.path.basename(name)),
                                    shallow=False))
        shutil.rmtree(copy)

    def test_missing_corpus_is_one_line(self):
        bad = subprocess.run([sys.executable, SCRIPT, "--root=nowhere"], cwd=self.work,
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("make_noisy_corpus: error:", bad.stderr)
        self.assertEqual(bad.stderr.count("\n"), 1, bad.stderr)


if __name__ == "__main__":
    unittest.main()
