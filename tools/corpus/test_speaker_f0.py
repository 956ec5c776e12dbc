"""Tests of tools/speaker_f0. Run: /usr/bin/python3 -m unittest discover -s tools/corpus"""

import os
import subprocess
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))
import toy_audio  # noqa: E402  (tools/corpus is on the path of unittest discover)

SCRIPT = os.path.join(os.path.dirname(HERE), "speaker_f0")


def tone(f0, seconds, rate=8000):
    t = np.arange(int(seconds * rate)) / float(rate)
    return sum(np.sin(2 * np.pi * h * f0 * t) / h for h in range(1, 6)) * 3000


class SpeakerF0Test(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        scp, utt2spk = [], []
        # Two speakers; each utterance a harmonic tone near its speaker's pitch.
        # high_0 (the first by name) is far below its speaker's median: --utterances=1 shows.
        for speaker, pitches in (("low", (98.0, 100.0, 103.0)), ("high", (170.0, 210.0, 220.0))):
            for i, f0 in enumerate(pitches):
                name = "%s_%d" % (speaker, i)
                toy_audio.write_wav(os.path.join(self.dir, name + ".wav"),
                                    np.round(tone(f0, 1.0)).astype(np.int16))
                # Relative paths: relative to the folder the tool runs in.
                scp.append("%s %s.wav" % (name, name))
                utt2spk.append("%s %s" % (name, speaker))
        self.write("wav.scp", scp)
        self.write("utt2spk", utt2spk)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, lines):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")

    def run_tool(self, *extra):
        return subprocess.run(["/usr/bin/python3", SCRIPT, "--wav-scp=wav.scp", "--utt2spk=utt2spk",
                               "--out=out/spk2f0"] + list(extra), cwd=self.dir,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)

    def test_each_speaker_gets_the_median_of_its_utterances(self):
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(self.dir, "out/spk2f0")) as f:
            f0 = {line.split()[0]: float(line.split()[1]) for line in f}
        self.assertEqual(sorted(f0), ["high", "low"])
        self.assertAlmostEqual(f0["low"], 100.0, delta=4.0)
        self.assertAlmostEqual(f0["high"], 210.0, delta=8.4)
        # --utterances=1: the first utterance by name alone.
        self.assertEqual(self.run_tool("--utterances=1").returncode, 0)
        with open(os.path.join(self.dir, "out/spk2f0")) as f:
            f0 = {line.split()[0]: float(line.split()[1]) for line in f}
        self.assertAlmostEqual(f0["high"], 170.0, delta=6.8)

    def assert_refused(self, message):
        """The tool exits 1 with `message`, one line on stderr, and writes no spk2f0."""
        done = self.run_tool()
        self.assertEqual(done.returncode, 1)
        self.assertIn(message, done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out/spk2f0")))

    def test_bad_lists_are_one_line_naming_the_file_and_nothing_is_written(self):
        self.write("utt2spk", ["low_0 low", "low_1"])
        self.assert_refused("utt2spk:2: expected 'utterance value'")
        self.write("utt2spk", ["nobody_0 low"])
        self.assert_refused("utterance 'nobody_0' is not in wav.scp")
        self.write("utt2spk", ["low_0 quiet"])
        toy_audio.write_wav(os.path.join(self.dir, "low_0.wav"), np.zeros(8000, np.int16))
        self.assert_refused("speaker 'quiet': none of its first 20 utterances is voiced")
        self.write("wav.scp", ["low_0 gone.wav"])
        self.write("utt2spk", ["low_0 low"])
        self.assert_refused("gone.wav: cannot read")
        self.write("utt2spk", [""])
        self.assert_refused("utt2spk: names no utterance")


if __name__ == "__main__":
    unittest.main()
