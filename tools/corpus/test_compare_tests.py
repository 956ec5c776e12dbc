"""Tests of tools/compare_tests. Run: /usr/bin/python3 -m unittest discover -s tools/corpus"""

import math
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "compare_tests")


def write_results(folder, task, score, rows):
    os.makedirs(folder, exist_ok=True)
    column = {"sdr": "SDR_improvement", "si_sdr": "SI-SDR_improvement"}[score]
    with open(os.path.join(folder, "results_%s_%s_utterances.csv" % (task, score)), "w") as f:
        f.write("utterance,mixture_kind,speakers,%s,files\n" % column)
        for utterance, value in rows:
            f.write("%s,x,a b,%s,-\n" % (utterance, value))


class CompareTestsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.a = os.path.join(self.tmp.name, "a")
        self.b = os.path.join(self.tmp.name, "b")
        # B gains 1, 2 and 3 dB SDRi on the mixtures both scored; m4 is unscored in A (an empty
        # field) and m5 only in B: both are left out.
        write_results(self.a, "t", "sdr", [("m1", 1), ("m2", 2), ("m3", 3), ("m4", "")])
        write_results(self.b, "t", "sdr", [("m1", 2), ("m2", 4), ("m3", 6), ("m4", 9), ("m5", 9)])
        write_results(self.a, "t", "si_sdr", [("m1", 0), ("m2", 0), ("m3", 0)])
        write_results(self.b, "t", "si_sdr", [("m1", -1), ("m2", -1), ("m3", -1)])
        write_results(self.a, "only_a", "sdr", [("m1", 1)])
        write_results(self.a, "only_a", "si_sdr", [("m1", 1)])

    def tearDown(self):
        self.tmp.cleanup()

    def run_tool(self, *args):
        return subprocess.run([SCRIPT] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def test_paired_means_and_standard_error_over_the_mixtures_both_scored(self):
        done = self.run_tool(self.a, self.b)
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = done.stdout.splitlines()
        self.assertEqual(len(lines), 3)  # the header, then SDRi and SI-SDRi of the common task
        sdr = lines[1].split()
        self.assertEqual(sdr[:3], ["t", "SDRi", "3"])
        self.assertEqual([float(v) for v in sdr[3:6]], [2.0, 4.0, 2.0])
        # Differences 1, 2, 3: standard error sqrt(var / n) = sqrt(1 / 3).
        self.assertAlmostEqual(float(sdr[7]), math.sqrt(1.0 / 3.0), places=2)
        si_sdr = lines[2].split()
        self.assertEqual([float(v) for v in si_sdr[3:6]] + [float(si_sdr[7])],
                         [0.0, -1.0, -1.0, 0.0])

    def test_a_chosen_task(self):
        done = self.run_tool(self.a, self.b, "--tasks=t")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(len(done.stdout.splitlines()), 3)

    def assert_refused(self, message, *args):
        done = self.run_tool(*args)
        self.assertEqual(done.returncode, 1)
        self.assertIn(message, done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)

    def test_refusals_are_one_line(self):
        self.assert_refused("no such folder", self.a, os.path.join(self.tmp.name, "missing"))
        self.assert_refused("task only_a: not tested in both", self.a, self.b, "--tasks=only_a")
        empty = os.path.join(self.tmp.name, "empty")
        os.makedirs(empty)
        self.assert_refused("no test task in common", self.a, empty)
        write_results(self.b, "t", "sdr", [("m1", "many")])
        self.assert_refused("results_t_sdr_utterances.csv:2: 'many' is not a number",
                            self.a, self.b)
        write_results(self.b, "t", "sdr", [("m9", 1)])
        self.assert_refused("t: no mixture scored in both", self.a, self.b)


if __name__ == "__main__":
    unittest.main()
