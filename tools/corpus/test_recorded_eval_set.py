"""Tests of tools/make_recorded_eval_set. Run: /usr/bin/python3 -m unittest discover -s tools/corpus

The end-to-end tests need sox, codec2-examples and pocketsphinx-testdata (./run installs them);
those of --from-corpus run on a small corpus written here, and on data/recorded_corpus when it exists.
"""

import filecmp
import glob
import json
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
REPO = os.path.dirname(os.path.dirname(HERE))
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

    def test_at_16_khz_only_recordings_made_at_16_khz_are_cut_as_at_8_khz(self):
        with tempfile.TemporaryDirectory() as tmp:
            low, high = os.path.join(tmp, "r8"), os.path.join(tmp, "r16")
            for root, extra in ((low, []), (high, ["--rate=16000"])):
                done = self.run_script("--mixtures=6", "--root=" + root, *extra)
                self.assertEqual(done.returncode, 0, done.stderr)
            entries = toy_lists.read_lists(os.path.join(high, "2speakers", "wav16k", "min", "tt"))
            self.assertEqual(len(entries), 6)
            for name, mix, sources in entries:
                self.assertEqual(toy_audio.check_mixture(mix, sources, min_active_fraction=0.1,
                                                         expected_rate=16000)[1], 0)
            self.assertEqual(self.run_script("--verify", "--root=" + high).returncode, 0)
            with open(os.path.join(high, "sources", "index.tsv")) as f:
                rows = [line.rstrip("\n").split("\t") for line in f.readlines()[1:]]
            # Never codec2's 8 kHz recordings; each utterance the 8 kHz set's at twice the rate.
            origins = set(row[2] for row in rows)
            self.assertTrue(origins)
            for origin in origins:
                self.assertGreaterEqual(recorded.native_rate(
                    origin, dict((p, r) for _, p, r in recorded.RECORDINGS)[origin]), 16000, origin)
            with open(os.path.join(low, "sources", "index.tsv")) as f:
                self.assertIn(recorded.CODEC2 + "/wav/hts1a.wav",
                              set(line.split("\t")[2] for line in f))
            for path, _, _, _, _ in rows:
                a, rate_a = toy_audio.read_wav(path.replace(high, low))
                b, rate_b = toy_audio.read_wav(path)
                self.assertEqual((rate_a, rate_b), (8000, 16000))
                self.assertLessEqual(abs(len(b) - 2 * len(a)), 2, path)

    def test_refuses_a_folder_it_did_not_make(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "precious.txt"), "w") as f:
                f.write("keep")
            done = self.run_script("--mixtures=2", "--root=" + tmp)
            self.assertEqual(done.returncode, 1)
            self.assertIn("refusing to write into it", done.stderr)
            self.assertTrue(os.path.exists(os.path.join(tmp, "precious.txt")))


class HeldoutPlanTest(unittest.TestCase):
    def test_pairs_cross_split_groups_when_they_can(self):
        groups = {"a": "lang_ca", "b": "lang_ca", "c": "lang_es", "d": "lang_he"}
        pairs = recorded.heldout_pairs(groups)
        self.assertEqual(pairs, [("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")])
        # One group only: every pair of different speakers.
        self.assertEqual(recorded.heldout_pairs({"a": "g", "b": "g", "c": "g"}),
                         [("a", "b"), ("a", "c"), ("b", "c")])

    def test_plan_draws_only_the_given_pairs_equally_often(self):
        groups = {"a": "g1", "b": "g1", "c": "g2", "d": "g3"}
        utterances = {s: [dict(path="%s_%d" % (s, i)) for i in range(4)] for s in groups}
        pairs = recorded.heldout_pairs(groups)
        plan = recorded.plan_mixtures(utterances, 50, 2, pairs, prefix="heldout")
        counts = {}
        for mixture in plan:
            (a, _), (b, _) = mixture["sources"]
            self.assertNotEqual(groups[a], groups[b])
            self.assertTrue(mixture["name"].startswith("heldout_"))
            key = tuple(sorted((a, b)))
            counts[key] = counts.get(key, 0) + 1
        self.assertEqual(sorted(counts), pairs)
        self.assertEqual(sorted(counts.values()), [10] * 5)
        genders = {"a": "M", "b": "F", "c": "F", "d": "F"}
        self.assertIn("50 mixtures of 5 speaker pairs (10-10 each): 30 same gender, "
                      "20 different gender, 0 within one split group",
                      recorded.describe_plan(plan, genders, groups))


def write_corpus(root, speakers, utterances_per_speaker=3):
    """A recorded corpus as tools/make_recorded_corpus lays it out: speakers are
    (name, split, gender, group); each utterance is a 2-3 s harmonic tone at the speaker's F0."""
    rows = ["speaker\tpackage\tlanguage\tgender\tmedian_f0_hz\tutterances\tminutes\tsplit"
            "\tgroup\n"]
    lists = {}
    for number, (name, split, gender, group) in enumerate(speakers):
        f0 = (110.0 if gender == "M" else 210.0) + 7 * number
        rows.append("%s\tpkg\txx\t%s\t%.0f\t%d\t0.1\t%s\t%s\n"
                    % (name, gender, f0, utterances_per_speaker, split, group))
        for i in range(utterances_per_speaker):
            utt = "%s_%04d" % (name, i + 1)
            path = os.path.join(root, "utterances", name, utt + ".wav")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            toy_audio.write_wav(path, tone(f0 * (1 + 0.03 * i), 2.0 + 0.5 * i).astype(np.int16))
            lists.setdefault(split, []).append((utt, path, name))
    toy_lists.write_text(os.path.join(root, "speakers.tsv"), "".join(rows))
    for split in ("tr", "cv", "tt"):
        entries = lists.get(split, [])
        toy_lists.write_text(os.path.join(root, split + "_wav.scp"),
                             "".join("%s %s\n" % (utt, path) for utt, path, _ in entries))
        toy_lists.write_text(os.path.join(root, split + "_utt2spk"),
                             "".join("%s %s\n" % (utt, name) for utt, _, name in entries))
    toy_lists.write_text(os.path.join(root, ".complete"), "{}\n")


class HeldoutEndToEndTest(unittest.TestCase):
    SPEAKERS = [("kle_xx", "tt", "F", "lang_xx"), ("ktu_xx", "tt", "F", "lang_xx"),
                ("tux_yy", "tt", "M", "lang_yy"), ("tux_zz", "tr", "M", "lang_zz")]

    def run_script(self, *args, cwd=None):
        return subprocess.run([SCRIPT] + list(args), stdout=subprocess.PIPE, cwd=cwd,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def test_mixes_held_out_speakers_of_different_groups_deterministically(self):
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus")
            write_corpus(corpus, self.SPEAKERS)
            roots = [os.path.join(tmp, name) for name in ("a", "b")]
            for root in roots:
                done = self.run_script("--from-corpus=" + corpus, "--mixtures=6", "--root=" + root)
                self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("3 speakers (2 F) of 2 split groups", done.stdout)
            self.assertIn("6 mixtures of 2 speaker pairs (3-3 each): 0 same gender, "
                          "6 different gender, 0 within one split group", done.stdout)
            directory = os.path.join(roots[0], "2speakers", "wav8k", "min", "tt")
            entries = toy_lists.read_lists(directory)
            self.assertEqual(len(entries), 6)
            for name, mix, sources in entries:
                self.assertTrue(name.startswith("heldout_"), name)
                self.assertNotIn("tux_zz", name)   # a training speaker
                self.assertEqual(toy_audio.check_mixture(mix, sources, min_active_fraction=0.1)[1], 0)
                for path in [mix] + sources:
                    self.assertTrue(filecmp.cmp(path, path.replace(roots[0], roots[1]),
                                                shallow=False), path)
            with open(os.path.join(directory, "utt_spkinfo.txt")) as f:
                for line in f:
                    fields = line.split()
                    self.assertEqual(sorted(fields[3::2]), ["F", "M"], line)
            with open(os.path.join(roots[0], "speakers.tsv")) as f:
                header = f.readline().split()
                self.assertEqual(header, ["id", "gender", "median_f0_hz", "utterances",
                                          "seconds", "group"])
                self.assertEqual([row.split("\t")[0] for row in f], ["kle_xx", "ktu_xx", "tux_yy"])
            self.assertTrue(os.path.exists(os.path.join(roots[0], recorded.OWNER_MARK)))
            again = self.run_script("--from-corpus=" + corpus, "--mixtures=6", "--root=" + roots[0])
            self.assertIn("nothing to do", again.stdout)
            self.assertEqual(self.run_script("--verify", "--root=" + roots[0]).returncode, 0)
            # A remade corpus (its stamp changed) makes the set anew.
            toy_lists.write_text(os.path.join(corpus, ".complete"), '{"seed": 2}\n')
            rebuilt = self.run_script("--from-corpus=" + corpus, "--mixtures=6",
                                      "--root=" + roots[0])
            self.assertEqual(rebuilt.returncode, 0, rebuilt.stderr)
            self.assertNotIn("nothing to do", rebuilt.stdout)

    def test_a_16_khz_set_takes_a_16_khz_corpus(self):
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus")
            write_corpus(corpus, self.SPEAKERS)   # 8 kHz
            done = self.run_script("--from-corpus=" + corpus, "--mixtures=2", "--rate=16000",
                                   "--root=" + os.path.join(tmp, "set"))
            self.assertEqual(done.returncode, 1)
            self.assertIn("8000 Hz, expected 16000 (--rate)", done.stderr)

    def test_refuses_a_tt_speaker_that_also_trains(self):
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus")
            write_corpus(corpus, self.SPEAKERS)
            self.assert_refused(corpus, "tr", "kle_xx", [],
                                "speaker kle_xx of tt is also in tr or cv: the splits share a speaker")

    def assert_refused(self, corpus, split, speaker, options, message):
        """Adds an utterance of speaker to the corpus's split list: the set is refused with
        message, and nothing is written."""
        with open(os.path.join(corpus, split + "_utt2spk"), "a") as f:
            f.write("extra_0001 %s\n" % speaker)
        out = os.path.join(os.path.dirname(corpus), "out")
        done = self.run_script("--from-corpus=" + corpus, "--mixtures=2", "--root=" + out,
                               *options)
        self.assertEqual(done.returncode, 1)
        self.assertIn(message, done.stderr)
        self.assertFalse(os.path.exists(out))

    def test_the_cv_split_mixes_only_validation_speakers(self):
        speakers = self.SPEAKERS + [("kle_vv", "cv", "M", "lang_vv"),
                                    ("ktu_ww", "cv", "F", "lang_ww")]
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus")
            write_corpus(corpus, speakers)
            root = os.path.join(tmp, "cv")
            done = self.run_script("--from-corpus=" + corpus, "--split=cv", "--mixtures=4",
                                   "--root=" + root)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("Validation recorded set %s from %s (cv): 2 speakers (1 F)"
                          % (root, corpus), done.stdout)
            self.assertFalse(os.path.exists(os.path.join(root, "2speakers", "wav8k", "min", "tt")))
            entries = toy_lists.read_lists(os.path.join(root, "2speakers", "wav8k", "min", "cv"))
            self.assertEqual(len(entries), 4)
            for name, mix, sources in entries:
                self.assertTrue(name.startswith("cvrec_"), name)
                self.assertEqual(sorted(s for s in ("kle_vv", "ktu_ww") if s in name),
                                 ["kle_vv", "ktu_ww"], name)
                self.assertEqual(toy_audio.check_mixture(mix, sources, min_active_fraction=0.1)[1], 0)
            self.assertEqual(self.run_script("--verify", "--root=" + root).returncode, 0)
            again = self.run_script("--from-corpus=" + corpus, "--split=cv", "--mixtures=4",
                                    "--root=" + root)
            self.assertIn("nothing to do", again.stdout)
            # The tt set of the same arguments is another set: made anew, and its stamp is the
            # one tt sets had before --split existed.
            tt = self.run_script("--from-corpus=" + corpus, "--mixtures=4", "--root=" + root)
            self.assertEqual(tt.returncode, 0, tt.stderr)
            self.assertNotIn("nothing to do", tt.stdout)
            with open(os.path.join(root, recorded.STAMP)) as f:
                self.assertNotIn("split", json.load(f))
            # A cv speaker who also tests is refused, naming the split.
            self.assert_refused(corpus, "tt", "kle_vv", ["--split=cv"],
                                "speaker kle_vv of cv is also in tr or tt: the splits share a speaker")

    def test_the_tr_split_mixes_only_training_speakers(self):
        speakers = self.SPEAKERS + [("kle_uu", "tr", "F", "lang_uu")]
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus")
            write_corpus(corpus, speakers)
            root = os.path.join(tmp, "tr")
            done = self.run_script("--from-corpus=" + corpus, "--split=tr", "--mixtures=4",
                                   "--root=" + root)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("Training recorded set %s from %s (tr): 2 speakers (1 F)"
                          % (root, corpus), done.stdout)
            entries = toy_lists.read_lists(os.path.join(root, "2speakers", "wav8k", "min", "tr"))
            self.assertEqual(len(entries), 4)
            for name, mix, sources in entries:
                self.assertTrue(name.startswith("trrec_"), name)
                self.assertEqual(sorted(s for s in ("kle_uu", "tux_zz") if s in name),
                                 ["kle_uu", "tux_zz"], name)
            self.assertEqual(self.run_script("--verify", "--root=" + root).returncode, 0)
            # A training speaker who also tests is refused.
            self.assert_refused(corpus, "tt", "kle_uu", ["--split=tr"],
                                "speaker kle_uu of tr is also in cv or tt: the splits share a speaker")

    def test_the_cv_split_needs_a_corpus(self):
        done = self.run_script("--split=cv", "--root=/nonexistent/out")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--split=cv needs --from-corpus", done.stderr)

    @unittest.skipUnless(os.path.exists(os.path.join(REPO, "data", "recorded_corpus", ".complete")),
                         "no data/recorded_corpus (tools/make_recorded_corpus makes it)")
    def test_the_recorded_corpus_gives_held_out_pairs_of_different_groups(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "heldout")
            done = self.run_script("--from-corpus=data/recorded_corpus", "--mixtures=8",
                                   "--root=" + root, cwd=REPO)
            self.assertEqual(done.returncode, 0, done.stderr)
            speakers = recorded.heldout_speakers(os.path.join(REPO, "data", "recorded_corpus"))
            with open(os.path.join(root, "2speakers", "wav8k", "min", "tt", "utt_spkinfo.txt")) as f:
                for line in f:
                    a, b = line.split()[2::2]
                    self.assertNotEqual(speakers[a]["group"], speakers[b]["group"], line)
            self.assertEqual(len(glob.glob(os.path.join(root, "2speakers/wav8k/min/tt/mix/*"))), 8)


if __name__ == "__main__":
    unittest.main()
