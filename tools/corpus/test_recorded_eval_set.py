"""Tests of tools/make_recorded_eval_set. Run: /usr/bin/python3 -m unittest discover -s tools/corpus

The end-to-end tests need sox, codec2-examples and pocketsphinx-testdata (./run installs them).
"""

import filecmp
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import toy_audio  # noqa: E402
import toy_lists  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(HERE), "make_recorded_eval_set")
_loader = importlib.machinery.SourceFileLoader("make_recorded_eval_set", SCRIPT)
_spec = importlib.util.spec_from_loader(_loader.name, _loader)
recorded = importlib.util.module_from_spec(_spec)
_loader.exec_module(recorded)


def tone(f0, seconds, rate=8000):
    t = np.arange(int(seconds * rate)) / float(rate)
    return sum(np.sin(2 * np.pi * h * f0 * t) / h for h in range(1, 6)) * 3000


class SplitTest(unittest.TestCase):
    def test_pauses_end_utterances_and_short_pieces_are_dropped(self):
        # 2 s speech, 0.5 s pause, 0.4 s speech (too short alone, but joined: 2.9 s <= 5 s),
        # 0.6 s pause, 3 s speech, 0.5 s pause, 0.5 s speech (joined with the 3 s: 4 s).
        silence = lambda s: np.zeros(int(s * 8000))
        x = np.concatenate([tone(120, 2.0), silence(0.5), tone(120, 0.4), silence(0.6),
                            tone(200, 3.0), silence(0.5), tone(200, 0.5), silence(0.3)])
        pieces = recorded.split_utterances(x.astype(np.int16))
        seconds = [(a / 8000.0, b / 8000.0) for a, b in pieces]
        self.assertEqual(len(seconds), 2, seconds)
        self.assertAlmostEqual(seconds[0][0], 0.0, delta=0.01)
        self.assertAlmostEqual(seconds[0][1], 2.95, delta=0.02)
        self.assertAlmostEqual(seconds[1][0], 3.45, delta=0.02)
        self.assertAlmostEqual(seconds[1][1], 7.55, delta=0.02)

    def test_long_speech_is_cut_at_its_quietest_frame(self):
        x = tone(150, 8.0)
        x[int(3.5 * 8000):int(3.52 * 8000)] *= 0.01   # a dip, not a pause
        pieces = recorded.split_utterances(x.astype(np.int16))
        self.assertEqual(len(pieces), 2)
        self.assertAlmostEqual(pieces[0][1] / 8000.0, 3.55, delta=0.03)
        for a, b in pieces:
            self.assertLessEqual((b - a) / 8000.0, recorded.MAX_SECONDS + 0.1)

    def test_silence_has_no_utterance(self):
        self.assertEqual(recorded.split_utterances(np.zeros(16000, np.int16)), [])


class PitchTest(unittest.TestCase):
    def test_median_f0_of_harmonic_tones(self):
        for f0 in (95.0, 130.0, 210.0):
            self.assertAlmostEqual(recorded.median_f0(tone(f0, 1.0)), f0, delta=0.04 * f0)


class PlanTest(unittest.TestCase):
    def test_pairs_are_two_speakers_balanced_and_levels_opposite(self):
        utterances = {s: [dict(path="%s_%d" % (s, i)) for i in range(3)] for s in "abcd"}
        plan = recorded.plan_mixtures(utterances, 60, seed=4)
        self.assertEqual(len(plan), 60)
        pairs = {}
        for mixture in plan:
            (a, ua), (b, ub) = mixture["sources"]
            self.assertNotEqual(a, b)
            self.assertTrue(ua["path"].startswith(a) and ub["path"].startswith(b))
            g1, g2 = mixture["gains"]
            self.assertEqual(g1, -g2)
            self.assertLessEqual(abs(g1), 2.5)
            key = frozenset((a, b))
            pairs[key] = pairs.get(key, 0) + 1
        self.assertEqual(sorted(pairs.values()), [10] * 6)   # 6 pairs, 10 rounds each
        self.assertEqual(len({m["name"] for m in plan}), 60)
        self.assertEqual(plan, recorded.plan_mixtures(utterances, 60, seed=4))


@unittest.skipUnless(all(os.path.exists(path) for _, path, _ in recorded.RECORDINGS),
                     "needs codec2-examples and pocketsphinx-testdata")
class EndToEndTest(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([SCRIPT] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def test_generates_a_checked_deterministic_set(self):
        with tempfile.TemporaryDirectory() as tmp:
            roots = [os.path.join(tmp, name) for name in ("a", "b")]
            for root in roots:
                done = self.run_script("--mixtures=6", "--root=" + root)
                self.assertEqual(done.returncode, 0, done.stderr)
            listed = os.path.join("2speakers", "wav8k", "min", "tt")
            entries = toy_lists.read_lists(os.path.join(roots[0], listed))
            self.assertEqual(len(entries), 6)
            for name, mix, sources in entries:
                length, error = toy_audio.check_mixture(mix, sources, min_active_fraction=0.1)
                self.assertEqual(error, 0)
                other = mix.replace(roots[0], roots[1])
                self.assertTrue(filecmp.cmp(mix, other, shallow=False), name)
            with open(os.path.join(roots[0], "speakers.tsv")) as f:
                genders = {row.split("\t")[0]: row.split("\t")[1] for row in f.readlines()[1:]}
            self.assertEqual(genders["hts2a"], "F")
            self.assertEqual(genders["librivox"], "M")
            again = self.run_script("--mixtures=6", "--root=" + roots[0])
            self.assertIn("nothing to do", again.stdout)
            self.assertEqual(self.run_script("--verify", "--root=" + roots[0]).returncode, 0)

    def test_refuses_a_folder_it_did_not_make(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "precious.txt"), "w") as f:
                f.write("keep")
            done = self.run_script("--mixtures=2", "--root=" + tmp)
            self.assertEqual(done.returncode, 1)
            self.assertIn("refusing to write into it", done.stderr)
            self.assertTrue(os.path.exists(os.path.join(tmp, "precious.txt")))


if __name__ == "__main__":
    unittest.main()
