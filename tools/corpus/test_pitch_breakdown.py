"""Tests of tools/pitch_breakdown. Run: /usr/bin/python3 -m unittest discover -s tools/corpus"""

import os
import subprocess
import tempfile
import unittest

import numpy as np

import toy_audio  # noqa: E402  (tools/corpus is on the path of unittest discover)

HERE = os.path.dirname(os.path.realpath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "pitch_breakdown")


def sine(frequency, seconds=1.0, rate=8000):
    return np.sin(2 * np.pi * frequency * np.arange(int(seconds * rate)) / float(rate)) * 3000


class PitchBreakdownTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.set = os.path.join(self.root, "set")
        self.test = os.path.join(self.root, "test")
        os.makedirs(self.test)
        os.makedirs(self.set)
        self.write_speakers([("low", 100), ("near", 104), ("high", 200)])
        # Two pairs 0.7 semitones apart, one an octave apart.
        self.mixtures = (("m1", "low near", 1.0, 0.5, 100, 104),
                         ("m2", "near low", 2.0, 1.5, 104, 100),
                         ("m3", "low high", 10.0, 9.0, 100, 200))
        for score, column in (("sdr", "SDR_improvement"), ("si_sdr", "SI-SDR_improvement")):
            with open(os.path.join(self.test, "results_t_%s_utterances.csv" % score), "w") as f:
                f.write("utterance,mixture_kind,speakers,%s,files\n" % column)
                for name, speakers, sdri, si_sdri, _, _ in self.mixtures:
                    f.write("%s,x,%s,%s,-\n" % (name, speakers, sdri if score == "sdr" else si_sdri))
        tt = os.path.join(self.set, "2speakers", "wav8k", "min", "tt")
        for name, _, _, _, f1, f2 in self.mixtures:
            # Far apart in frequency whatever the speakers' f0: the ideal masks separate them.
            s1, s2 = sine(f1), sine(10 * f2)
            for kind, x in (("s1", s1), ("s2", s2), ("mix", s1 + s2)):
                os.makedirs(os.path.join(tt, kind), exist_ok=True)
                toy_audio.write_wav(os.path.join(tt, kind, name + ".wav"),
                                    np.round(x).astype(np.int16))

    def tearDown(self):
        self.tmp.cleanup()

    def write_speakers(self, speakers):
        with open(os.path.join(self.set, "speakers.tsv"), "w") as f:
            f.write("id\tgender\tmedian_f0_hz\n")
            for name, f0 in speakers:
                f.write("%s\tM\t%s\n" % (name, f0))

    def assert_refused(self, message):
        """The tool exits 1 with `message`, one line on stderr."""
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(message, done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)

    def run_tool(self, *extra):
        return subprocess.run(["/usr/bin/python3", SCRIPT, "--test=" + self.test, "--task=t",
                               "--set=" + self.set] + list(extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)

    def rows(self, output):
        return {line[:16].strip(): line[16:].split() for line in output.splitlines()[1:]}

    def test_mixtures_fall_in_their_bins_with_their_means(self):
        done = self.run_tool("--ideal")
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = self.rows(done.stdout)
        near, far = rows["< 4 semitones"], rows["7 or more"]
        self.assertEqual(near[0], "2")
        self.assertEqual(float(near[1]), 1.5)   # SDRi mean of 1 and 2
        self.assertEqual(float(near[3]), 0.5)   # its standard error
        self.assertEqual(float(near[4]), 1.0)   # SI-SDRi
        self.assertEqual(far[0], "1")
        self.assertEqual(float(far[1]), 10.0)
        self.assertEqual(rows["4 to 7"][0], "0")
        self.assertGreater(float(far[5]), 10.0)
        self.assertGreater(float(far[6]), 10.0)

    def test_unscored_mixtures_are_counted_and_left_out(self):
        # nabu test writes an empty field for a mixture it could not score.
        path = os.path.join(self.test, "results_t_sdr_utterances.csv")
        with open(path) as f:
            text = f.read().replace("m3,x,low high,10.0,", "m3,x,low high,,")
        with open(path, "w") as f:
            f.write(text)
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.rows(done.stdout)["7 or more"][0], "0")
        self.assertIn("(1 mixture(s) the scorer could not score left out)", done.stdout)

    def test_unknown_speakers_and_missing_files_are_one_line(self):
        self.write_speakers([("low", 100), ("high", 200)])
        self.assert_refused("speakers.tsv: no median f0 for speaker 'near'")
        self.write_speakers([("low", 100), ("near", 0), ("high", 200)])
        self.assert_refused("speakers.tsv:3: median_f0_hz of 'near' is not a pitch in Hz")
        self.write_speakers([("low", 100), ("near", 104), ("high", 200)])
        os.remove(os.path.join(self.test, "results_t_sdr_utterances.csv"))
        self.assert_refused("results_t_sdr_utterances.csv: cannot read")


if __name__ == "__main__":
    unittest.main()
