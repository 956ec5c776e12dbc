"""Tests of tools/make_recorded_corpus and tools/corpus/recorded_voices.py.
Run: /usr/bin/python3 -m unittest discover -s tools/corpus -p "test_*.py"

The helpers are tested on synthetic signals; the end-to-end tests need sox and the seven allowed
packages (./run installs them) and are skipped, with the reason, where those are missing.
"""

import glob
import hashlib
import json
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
import recorded_voices as rv  # noqa: E402
import toy_audio  # noqa: E402

REPOSITORY = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPOSITORY, "tools", "make_recorded_corpus")
_loader = importlib.machinery.SourceFileLoader("make_recorded_corpus", SCRIPT)
_spec = importlib.util.spec_from_loader(_loader.name, _loader)
corpus = importlib.util.module_from_spec(_spec)
_loader.exec_module(corpus)

RATE = rv.RATE
# Recordings that are evaluation only (tools/make_recorded_eval_set), never training material.
EVALUATION_FOLDERS = ("/usr/share/codec2", "/usr/share/pocketsphinx")


def voice(f0, seconds, vibrato=0.0, level=8000.0):
    """A harmonic tone whose pitch moves by +-vibrato semitones at 3 Hz: voiced like a vowel."""
    t = np.arange(int(seconds * RATE)) / float(RATE)
    pitch = f0 * 2 ** (vibrato * np.sin(2 * np.pi * 3 * t) / 12.0)
    phase = 2 * np.pi * np.cumsum(pitch) / RATE
    return sum(np.sin(h * phase) / h for h in range(1, 8)) * level / 2.5


def silence(seconds):
    return np.zeros(int(seconds * RATE))


def installed(package):
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, universal_newlines=True)
    return done.returncode == 0 and "install ok installed" in done.stdout


class CutTest(unittest.TestCase):
    def test_pauses_join_runs_up_to_the_longest_utterance(self):
        # 3 s + 0.5 s pause + 4 s join (7.5 s); 7 s more would pass 12 s, so it is its own.
        x = np.concatenate([voice(120, 3), silence(0.5), voice(120, 4), silence(0.5),
                            voice(120, 7), silence(0.4)])
        utterances, fragments = rv.cut_at_pauses(x.astype(np.int16))
        seconds = [(a / float(RATE), b / float(RATE)) for a, b in utterances]
        self.assertEqual(fragments, [])
        self.assertEqual(len(seconds), 2, seconds)
        self.assertAlmostEqual(seconds[0][0], 0.0, delta=0.01)
        self.assertAlmostEqual(seconds[0][1], 7.55, delta=0.02)
        self.assertAlmostEqual(seconds[1][0], 7.95, delta=0.02)
        self.assertAlmostEqual(seconds[1][1], 15.05, delta=0.02)

    def test_short_speech_is_a_fragment_and_a_click_is_nothing(self):
        x = np.concatenate([silence(0.5), voice(200, 0.8), silence(1.0)])
        utterances, fragments = rv.cut_at_pauses(x.astype(np.int16))
        self.assertEqual(utterances, [])
        self.assertEqual(len(fragments), 1)
        a, b = fragments[0]
        self.assertAlmostEqual(a / float(RATE), 0.45, delta=0.02)
        self.assertAlmostEqual(b / float(RATE), 1.35, delta=0.02)
        click = np.concatenate([silence(0.5), voice(200, 0.05), silence(1.0)])
        self.assertEqual(rv.cut_at_pauses(click.astype(np.int16)), ([], []))

    def test_long_speech_without_pauses_is_cut_within_bounds(self):
        x = voice(150, 30, vibrato=2)
        utterances, _ = rv.cut_at_pauses(x.astype(np.int16))
        self.assertGreaterEqual(len(utterances), 3)
        for a, b in utterances:
            self.assertGreaterEqual((b - a) / float(RATE), rv.MIN_SECONDS)
            self.assertLessEqual((b - a) / float(RATE), rv.MAX_SECONDS)
        self.assertEqual(utterances[-1][1], len(x))

    def test_silence_and_near_silence_have_no_speech(self):
        self.assertEqual(rv.cut_at_pauses(np.zeros(16000, np.int16)), ([], []))
        hiss = np.random.RandomState(1).normal(0, 10, 16000).astype(np.int16)   # -70 dBFS
        self.assertEqual(rv.cut_at_pauses(hiss), ([], []))


class PackTest(unittest.TestCase):
    def test_fragments_are_packed_to_the_target_and_the_rest_joins_the_last(self):
        second = RATE
        groups = rv.pack_fragments([second] * 12)
        # 5 fragments reach 5 s (6 s with gaps); the last two make 2.25 s, enough alone.
        self.assertEqual(groups, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]])
        # A lone leftover under MIN_SECONDS joins the previous group when that stays <= 12 s.
        self.assertEqual(rv.pack_fragments([second] * 6), [[0, 1, 2, 3, 4, 5]])
        for lengths in ([second] * 12, [int(1.9 * second)] * 9, [int(0.3 * second)] * 40):
            for group in rv.pack_fragments(lengths):
                total = rv.group_samples([lengths[i] for i in group])
                self.assertGreaterEqual(total, rv.MIN_SECONDS * RATE)
                self.assertLessEqual(total, rv.MAX_SECONDS * RATE)

    def test_too_little_speech_makes_no_utterance(self):
        self.assertEqual(rv.pack_fragments([RATE // 2, RATE // 2]), [])

    def test_joined_fragments_have_gaps_of_silence(self):
        pieces = [np.full(100, 7, np.int16), np.full(50, 9, np.int16)]
        joined = rv.join_fragments(pieces)
        gap = int(rv.GAP_SECONDS * RATE)
        self.assertEqual(len(joined), rv.group_samples([100, 50]))
        self.assertTrue((joined[100:100 + gap] == 0).all())
        self.assertTrue((joined[100 + gap:] == 9).all())


class FeatureTest(unittest.TestCase):
    def test_a_voice_is_voiced_at_its_pitch_with_a_spread(self):
        x = np.concatenate([voice(140, 1.5, vibrato=3), silence(0.5)])
        f = rv.voice_features(x)
        self.assertGreater(f["voiced"], 0.9)
        self.assertAlmostEqual(f["f0"], 140, delta=10)
        self.assertGreater(f["f0_spread"], corpus.MIN_SPEAKER_F0_SPREAD)
        self.assertGreater(f["dynamic_db"], corpus.MIN_DYNAMIC_DB)
        self.assertLess(f["flatness"], corpus.MAX_FLATNESS)
        self.assertIsNone(corpus.clip_rule(dict(f, clipped=0.0)))

    def test_a_monotone_voice_has_no_spread(self):
        f = rv.voice_features(voice(230, 1.5))
        self.assertLess(f["f0_spread"], corpus.MIN_SPEAKER_F0_SPREAD)

    def test_noise_is_unvoiced_and_flat(self):
        x = np.random.RandomState(2).normal(0, 3000, 2 * RATE)
        x[:RATE // 2] *= 0.001
        f = rv.voice_features(x)
        self.assertLess(f["voiced"], corpus.MIN_VOICED)
        self.assertGreater(f["flatness"], corpus.MAX_FLATNESS)
        self.assertEqual(corpus.clip_rule(dict(f, clipped=0.0)), "unvoiced")

    def test_speech_over_a_steady_background_is_noisy(self):
        rng = np.random.RandomState(3)
        x = np.concatenate([voice(120, 1.0, vibrato=2), silence(1.0)])
        x += rng.normal(0, 1500, len(x))
        f = rv.voice_features(x)
        self.assertEqual(corpus.clip_rule(dict(f, clipped=0.0)), "noisy")

    def test_clipping_counts_flat_tops_only(self):
        sine = 40000 * np.sin(2 * np.pi * 200 * np.arange(RATE) / 44100.0)
        clipped = np.clip(sine, -32768, 32767).astype(np.int16)
        self.assertGreater(rv.clipped_fraction(clipped), corpus.MAX_CLIPPED)
        self.assertEqual(rv.clipped_fraction((sine * 0.8).astype(np.int16)), 0.0)
        self.assertEqual(corpus.clip_rule(dict(voiced=1, dynamic_db=40, flatness=0.01,
                                               clipped=0.05)), "clipped")

        self.assertIsNone(corpus.clip_rule(dict(voiced=1, dynamic_db=40, flatness=0.01,
                                                clipped=0.05, repaired=True)))


def pulse_voice(rate, seconds, overdrive):
    """A voice with the sharp peaks of glottal pulses (19 cosine harmonics in phase) in
    syllables, peaking at overdrive x full scale, and its clipped int16 recording."""
    t = np.arange(int(seconds * rate)) / float(rate)
    phase = 2 * np.pi * np.cumsum(130 * 2 ** (2 * np.sin(2 * np.pi * 3 * t) / 12)) / rate
    clean = sum(np.cos(h * phase) * 0.8 ** h for h in range(1, 20))
    clean *= np.abs(np.sin(2 * np.pi * 2 * t)) ** 1.5
    clean *= 32767 * overdrive / np.abs(clean).max()
    return clean, np.clip(np.round(clean), -32767, 32767).astype(np.int16)


def snr_db(reference, estimate):
    return 10 * np.log10(np.sum(reference ** 2) / np.sum((estimate - reference) ** 2))


class RepairTest(unittest.TestCase):
    def test_repair_restores_clipped_peaks_of_a_pulse_voice(self):
        # Measured: 2x overdrive at 22.05 kHz clips 2.2 % of samples; SNR 10.7 dB clipped,
        # 16.9 dB repaired (3x at 44.1 kHz: 6.7 -> 11.6 dB).
        for rate, overdrive in ((22050, 2.0), (44100, 3.0), (16000, 2.5)):
            clean, clipped = pulse_voice(rate, 3, overdrive)
            self.assertTrue(corpus.MAX_CLIPPED < rv.clipped_fraction(clipped)
                            <= corpus.MAX_REPAIRED_CLIPPED, rate)
            repaired = rv.repair_clipping(clipped, max_run=rate // 1000)
            self.assertIsNotNone(repaired, rate)
            self.assertGreater(snr_db(clean, repaired), snr_db(clean, clipped) + 4.0, rate)
            # Outside the runs nothing moves, and inside them nothing falls below the level.
            runs = rv.clipped_runs(clipped)
            inside = np.zeros(len(clipped), dtype=bool)
            for a, b in runs:
                inside[a:b] = True
                self.assertGreaterEqual(np.abs(repaired[a:b]).min(), 32767 - 1)
            np.testing.assert_array_equal(repaired[~inside], clipped[~inside])

    def test_a_cubic_through_its_neighbours_is_restored_exactly(self):
        # A parabola's top: the Hermite cubic from the neighbours' values and their slopes (the
        # three-sample differences are exact on a parabola) is the parabola itself.
        n = np.arange(-30, 31, dtype=np.float64)
        clean = 40000 - 20 * n ** 2
        clipped = np.minimum(clean, 32767).astype(np.int16)
        runs = rv.clipped_runs(clipped)
        self.assertEqual(len(runs), 1)
        repaired = rv.repair_clipping(clipped, max_run=100)
        self.assertLess(np.abs(repaired - clean).max(), 1e-6)

    def test_runs_split_at_sign_flips_and_long_runs_are_not_repaired(self):
        x = np.array([0, 100, 32767, 32767, 32767, -32767, -32767, -32767, -32767, 5, 0],
                     dtype=np.int16)
        self.assertEqual(rv.clipped_runs(x), [(2, 5), (5, 9)])
        self.assertIsNone(rv.repair_clipping(x, max_run=3))
        self.assertIsNotNone(rv.repair_clipping(x, max_run=4))
        quiet = (x // 2).astype(np.int16)
        self.assertEqual(rv.clipped_runs(quiet), [])
        np.testing.assert_array_equal(rv.repair_clipping(quiet, max_run=4), quiet)


class SpeakerTest(unittest.TestCase):
    def test_speakers_follow_the_package_layouts(self):
        cases = [
            ("fillets-ng-data-cs", "/usr/share/games/fillets-ng/sound/airplane/cs/let-m-oko.ogg",
             ("fil_cs_m", "cs")),
            ("fillets-ng-data-nl", "/usr/share/games/fillets-ng/sound/keys/nl/kl-v-x.ogg",
             ("fil_nl_v", "nl")),
            ("fillets-ng-data-cs", "/usr/share/games/fillets-ng/sound/cabin1/cs/k1-pap-kruci.ogg",
             (None, "minor character or effect")),
            ("tuxpaint-stamps-default",
             "/usr/share/tuxpaint/stamps/animals/amphibians/frog-1_desc_fr.ogg", ("tux_fr", "fr")),
            ("tuxpaint-stamps-default", "/usr/share/tuxpaint/stamps/symbols/math/7_desc_es.ogg",
             ("tux_es", "es")),
            ("tuxpaint-stamps-default", "/usr/share/tuxpaint/stamps/animals/frog-1_desc.ogg",
             ("tux_en", "en")),
            ("tuxpaint-stamps-default", "/usr/share/tuxpaint/stamps/animals/frog-1.ogg",
             (None, "sound effect")),
            ("klettres-data", "/usr/share/klettres/en_GB/alpha/a.ogg", ("kle_en-gb", "en_GB")),
            ("ktuberling-data", "/usr/share/ktuberling/sounds/sr@latin/uvo.ogg",
             ("ktu_sr-latin", "sr@latin")),
            ("hedgewars-data", "/usr/share/games/hedgewars/Data/Sounds/voices/Default_uk/Ow1.ogg",
             ("hw_default-uk", "uk")),
            ("festvox-ru", "/usr/share/festival/voices/russian/msu_ru_nsh_clunits/wav/ru_0001.wav",
             ("fvr_nsh", "ru")),
            ("gcin-voice", "/usr/share/gcin-voice/ogg/ba/3.ogg", ("gci_3", "zh")),
            ("gcin-voice", "/usr/share/gcin-voice/ogg/ba/5.ogg", ("gci_5", "zh")),
            ("kajongg", "/usr/share/kajongg/voices/female1/b1.ogg", ("kaj_en_female1", "en")),
            ("kajongg", "/usr/share/kajongg/voices/de/male2/pung.ogg", ("kaj_de_male2", "de")),
        ]
        for package, path, expected in cases:
            self.assertEqual(rv.speaker_of(package, path), expected, path)

    def test_split_groups_keep_possible_same_persons_together(self):
        self.assertEqual(corpus.split_group("tux_fr"), corpus.split_group("kle_fr"))
        self.assertEqual(corpus.split_group("kle_fr"), corpus.split_group("ktu_fr"))
        self.assertEqual(corpus.split_group("hw_robot"), corpus.split_group("hw_default"))
        self.assertNotEqual(corpus.split_group("fil_cs_m"), corpus.split_group("fil_cs_v"))

    def test_splits_are_speaker_disjoint_deterministic_and_keep_big_speakers_in_training(self):
        speakers = {"kle_%02d" % i: dict(seconds=60.0 * (1 + i % 5)) for i in range(40)}
        speakers["fil_cs_m"] = dict(seconds=40 * 60.0)
        split = corpus.assign_splits(speakers, seed=3)
        self.assertEqual(split, corpus.assign_splits(speakers, seed=3))
        self.assertEqual(split["fil_cs_m"], "tr")
        self.assertEqual(sum(v == "tt" for v in split.values()), 3)
        self.assertEqual(sum(v == "cv" for v in split.values()), 3)

    def test_training_only_packages_train_and_leave_the_held_out_splits_as_they_were(self):
        speakers = {"kle_%02d" % i: dict(seconds=60.0 * (1 + i % 5), package="klettres-data")
                    for i in range(40)}
        split = corpus.assign_splits(speakers, seed=3)
        more = dict(speakers)
        more["fvr_nsh"] = dict(seconds=99 * 60.0, package="festvox-ru")
        for voice in ("en_female1", "en_male1", "de_female1", "de_male2"):
            more["kaj_" + voice] = dict(seconds=5.0 * 60, package="kajongg")
        more["gci_3"] = dict(seconds=7.8 * 60, package="gcin-voice")
        with_them = corpus.assign_splits(more, seed=3)
        self.assertEqual({s: v for s, v in with_them.items() if s in speakers}, split)
        self.assertTrue(all(with_them[s] == "tr" for s in more if s not in speakers))
        self.assertEqual(corpus.split_group("kaj_en_female1"), corpus.split_group("kaj_de_male2"))
        # The default corpus reads the seven packages it was first made of; 'all' every one.
        self.assertEqual(corpus.parse_args([]).packages, tuple(sorted(rv.DEFAULT_PACKAGES)))
        self.assertEqual(corpus.parse_args(["--packages=all"]).packages,
                         tuple(sorted(rv.ALLOWED_PACKAGES)))
        self.assertTrue(set(rv.TRAIN_ONLY_PACKAGES) <= set(rv.ALLOWED_PACKAGES))
        self.assertFalse(set(rv.TRAIN_ONLY_PACKAGES) & set(rv.DEFAULT_PACKAGES))

    def test_repaired_clips_of_held_out_groups_are_left_out_and_the_splits_kept(self):
        def clip(speaker, minutes, repaired):
            features = dict(voiced=1.0, dynamic_db=40.0, flatness=0.01, f0=200.0, f0_spread=2.0,
                            clipped=0.02 if repaired else 0.0, repaired=repaired)
            return dict(path="/x/%s/%s" % (speaker, repaired), package="klettres-data",
                        speaker=speaker, language="xx", seconds=60.0 * minutes,
                        features=features, utterances=[(0, int(60 * minutes * RATE))],
                        fragments=[])

        # 30 speakers of 1-5 minutes, each with a repaired clip that would triple it.
        clips = []
        for i in range(30):
            clips += [clip("kle_%02d" % i, 1 + i % 5, False), clip("kle_%02d" % i, 10, True)]
        clips.append(clip("kle_new", 10, True))   # a speaker only repairs make
        args = corpus.parse_args(["--repair-clipping"])
        removed = []
        admitted, split = corpus.admit_repaired(args, clips, removed)
        unrepaired = {c["speaker"]: dict(seconds=c["seconds"]) for c in clips
                      if not c["features"]["repaired"]}
        self.assertEqual(split, corpus.assign_splits(unrepaired, args.seed))
        held_out = [s for s, name in split.items() if name != "tr"]
        self.assertTrue(held_out)
        self.assertEqual(sorted(c["speaker"] for rule, c in removed), sorted(held_out))
        self.assertEqual(set(rule for rule, _ in removed), {"held_out_repaired"})
        for c in admitted:
            self.assertFalse(c["features"]["repaired"] and split.get(c["speaker"], "tr") != "tr")
        self.assertIn("kle_new", [c["speaker"] for c in admitted])

    def test_the_guard_refuses_evaluation_and_foreign_files(self):
        codec2 = "/usr/share/codec2/wav/hts1a.wav"
        for package, path, owned in (
                ("codec2-examples", codec2, {codec2}),
                ("pocketsphinx-testdata", "/usr/share/pocketsphinx/test/data/numbers.raw", set()),
                ("klettres-data", codec2, {codec2}),
                ("klettres-data", "/usr/share/klettres/en/alpha/a.ogg", set())):
            with self.assertRaises(toy_audio.CorpusError) as caught:
                corpus.check_provenance(package, path, owned)
            self.assertIn("refusing", str(caught.exception))
        self.assertFalse(any(rv.allowed_prefix(p, codec2) for p in rv.ALLOWED_PACKAGES))

    @unittest.skipUnless(shutil.which("dpkg-query"), "needs dpkg-query")
    def test_a_missing_package_is_named_with_the_command_that_installs_it(self):
        with self.assertRaises(toy_audio.CorpusError) as caught:
            corpus.package_files("nabu-no-such-package")
        self.assertIn("nabu-no-such-package is not installed", str(caught.exception))
        self.assertIn("apt-get install -y", str(caught.exception))


class CommandLineTest(unittest.TestCase):
    def test_help_names_every_option(self):
        done = subprocess.run([SCRIPT, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        for option in ("--root", "--packages", "--max-files", "--repair-clipping", "--verify"):
            self.assertIn(option, done.stdout)
        self.assertIn("at most 5% of samples clipped", " ".join(done.stdout.split()))


TINY_PACKAGES = ("fillets-ng-data-cs", "klettres-data", "ktuberling-data")
TINY = ["--packages=" + ",".join(TINY_PACKAGES), "--max-files=4", "--min-speaker-seconds=3"]


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def tree_digest(root):
    """{relative path: sha1} of every file under root."""
    digests = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                digests[os.path.relpath(path, root)] = hashlib.sha1(f.read()).hexdigest()
    return digests


@unittest.skipUnless(shutil.which("sox") and all(installed(p) for p in TINY_PACKAGES),
                     "needs sox and %s (./run installs them)" % " ".join(TINY_PACKAGES))
class EndToEndTest(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([SCRIPT] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def check_corpus(self, root, rate=8000):
        lists = {}
        owner = {}
        for split in corpus.SPLITS:
            with open(os.path.join(root, split + "_wav.scp")) as f:
                scp = [line.split() for line in f]
            with open(os.path.join(root, split + "_utt2spk")) as f:
                utt2spk = [line.split() for line in f]
            self.assertEqual([r[0] for r in scp], [r[0] for r in utt2spk])
            for (utt, path), (_, speaker) in zip(scp, utt2spk):
                self.assertEqual(owner.setdefault(speaker, split), split, speaker)
                self.assertTrue(utt.startswith(speaker + "_"))
                lists[utt] = (path, split)
        self.assertGreater(len(set(owner.values())), 1)
        for utt, (path, _) in lists.items():
            samples, read_rate = toy_audio.read_wav(path)   # 16-bit mono, or it raises
            self.assertEqual(read_rate, rate)
            self.assertGreaterEqual(len(samples), rv.MIN_SECONDS * rate - 2)
            self.assertLessEqual(len(samples), rv.MAX_SECONDS * rate + 2)
        with open(os.path.join(root, "index.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f.readlines()[1:]]
        self.assertEqual(set(r[0] for r in rows), set(lists))
        assert_training_origins_allowed(self, rows)

    def test_tiny_corpus_is_checked_deterministic_and_idempotent(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "rc")
            done = self.run_script("--root=" + root, *TINY)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("removed", done.stdout)
            self.check_corpus(root)
            first = tree_digest(root)
            again = self.run_script("--root=" + root, *TINY)
            self.assertIn("nothing to do", again.stdout)
            self.assertEqual(self.run_script("--verify", "--root=" + root).returncode, 0)
            # Other arguments regenerate; the original ones, on one job, give the same bytes.
            self.assertEqual(self.run_script("--root=" + root, "--seed=5", *TINY).returncode, 0)
            done = self.run_script("--root=" + root, "--jobs=1", *TINY)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(tree_digest(root), first)

    def test_repaired_clips_only_train_and_leave_the_held_out_splits_as_they_were(self):
        with tempfile.TemporaryDirectory() as tmp:
            plain, repaired = os.path.join(tmp, "plain"), os.path.join(tmp, "repaired")
            for root, extra in ((plain, []), (repaired, ["--repair-clipping"])):
                done = self.run_script("--root=" + root, *(TINY + extra))
                self.assertEqual(done.returncode, 0, done.stderr)
            self.check_corpus(repaired)
            with open(os.path.join(repaired, "report.json")) as f:
                report = json.load(f)["repaired"]
            # The tiny corpus has clipped clips of ktu_sl that can be repaired (measured: 3).
            self.assertGreaterEqual(report["tr"]["clips"], 1)
            self.assertEqual(report["cv"]["clips"] + report["tt"]["clips"], 0)
            for name in ("cv", "tt"):
                lists = [read_lines(os.path.join(root, name + "_wav.scp")) for root in (plain,
                                                                                      repaired)]
                self.assertEqual([line.replace(plain, "R") for line in lists[0]],
                                 [line.replace(repaired, "R") for line in lists[1]])
                for line in lists[0]:
                    relative = os.path.relpath(line.split()[1], plain)
                    self.assertEqual(tree_digest(os.path.dirname(os.path.join(plain, relative))),
                                     tree_digest(os.path.dirname(os.path.join(repaired,
                                                                              relative))))
            self.assertGreater(len(read_lines(os.path.join(repaired, "tr_wav.scp"))),
                               len(read_lines(os.path.join(plain, "tr_wav.scp"))))

    def test_at_16_khz_the_corpus_is_the_8_khz_one_less_what_was_recorded_below_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            low, high = os.path.join(tmp, "r8"), os.path.join(tmp, "r16")
            for root, extra in ((low, []), (high, ["--rate=16000"])):
                done = self.run_script("--root=" + root, *(TINY + extra))
                self.assertEqual(done.returncode, 0, done.stderr)
            self.check_corpus(high, rate=16000)
            self.assertEqual(self.run_script("--verify", "--rate=16000",
                                             "--root=" + high).returncode, 0)
            self.assertNotEqual(self.run_script("--verify", "--root=" + high).returncode, 0)

            def split_of(root):
                return {line.split()[0]: name for name in corpus.SPLITS
                        for line in read_lines(os.path.join(root, name + "_wav.scp"))}
            at8, at16 = split_of(low), split_of(high)
            # The same names in the same splits; none new; the same seconds at twice the samples.
            self.assertTrue(at16)
            self.assertLessEqual(set(at16), set(at8))
            for utterance, name in at16.items():
                self.assertEqual(at8[utterance], name, utterance)
                speaker = utterance.rsplit("_", 1)[0]
                a, _ = toy_audio.read_wav(os.path.join(low, "utterances", speaker, utterance + ".wav"))
                b, _ = toy_audio.read_wav(os.path.join(high, "utterances", speaker,
                                                       utterance + ".wav"))
                # A piece that ends its clip may miss a sample of the other decode.
                self.assertLessEqual(abs(len(b) - 2 * len(a)), 8, utterance)
            # What is left out was recorded below 16 kHz (ktuberling has 8 kHz words), and every
            # clip behind the 16 kHz corpus was recorded at 16 kHz or above: nothing upsampled.
            with open(os.path.join(high, "rejected.tsv")) as f:
                low_rate = [line.split("\t")[0] for line in f if "\tlow_rate\t" in line]
            with open(os.path.join(high, "index.tsv")) as f:
                origins = set(line.split("\t")[4] for line in f.readlines()[1:])

            def rate_of(path):
                return int(subprocess.run(["soxi", "-r", path], stdout=subprocess.PIPE,
                                          universal_newlines=True).stdout)
            for path in low_rate:
                self.assertLess(rate_of(path), 16000, path)
            for path in origins:
                self.assertGreaterEqual(rate_of(path), 16000, path)
            self.assertEqual(len(at8) - len(at16) > 0, bool(low_rate))

    def test_refuses_a_folder_it_did_not_make_and_a_package_not_allowed(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "precious.txt"), "w") as f:
                f.write("keep")
            done = self.run_script("--root=" + tmp, *TINY)
            self.assertEqual(done.returncode, 1)
            self.assertIn("refusing to write into it", done.stderr)
            self.assertTrue(os.path.exists(os.path.join(tmp, "precious.txt")))
            done = self.run_script("--root=" + tmp, "--packages=codec2-examples")
            self.assertEqual(done.returncode, 2)
            self.assertIn("not allowed for training", done.stderr)


def assert_training_origins_allowed(test, rows):
    """No tr or cv utterance comes from outside the seven allowed packages: by the package
    column, the folders, and by asking dpkg who owns each file."""
    origins = sorted(set(r[4] for r in rows if r[2] in ("tr", "cv")))
    test.assertTrue(origins)
    for row in rows:
        test.assertIn(row[3], rv.ALLOWED_PACKAGES)
        test.assertTrue(rv.allowed_prefix(row[3], row[4]), row[4])
        test.assertFalse(row[4].startswith(EVALUATION_FOLDERS), row[4])
    for i in range(0, len(origins), 500):
        done = subprocess.run(["dpkg-query", "-S"] + origins[i:i + 500], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)
        test.assertEqual(done.returncode, 0, done.stderr)
        for line in done.stdout.splitlines():
            packages = line.split(": ", 1)[0].split(", ")
            test.assertTrue(set(packages) <= set(rv.ALLOWED_PACKAGES), line)


DEFAULT_ROOT = os.path.join(REPOSITORY, "data", "recorded_corpus")
DEFAULT_CORPUS_MADE = os.path.exists(os.path.join(DEFAULT_ROOT, ".complete"))


def default_index_rows():
    """The rows of data/recorded_corpus/index.tsv, header left out."""
    with open(os.path.join(DEFAULT_ROOT, "index.tsv")) as f:
        return [line.rstrip("\n").split("\t") for line in f.readlines()[1:]]


@unittest.skipUnless(DEFAULT_CORPUS_MADE,
                     "no data/recorded_corpus (tools/make_recorded_corpus makes it)")
class DefaultCorpusTest(unittest.TestCase):
    def test_training_lists_hold_only_allowed_packages(self):
        assert_training_origins_allowed(self, default_index_rows())


class EveryRecordedCorpusTest(unittest.TestCase):
    """Every recorded corpus made here (data/recorded_corpus*, e.g. the 16 kHz one with the
    training-only packages) trains on allowed packages only; every shipped recipe draws its
    dynamic mixtures from training splits only."""

    def test_every_made_corpus_holds_only_allowed_packages(self):
        roots = sorted(glob.glob(os.path.join(REPOSITORY, "data", "recorded_corpus*")))
        made = [root for root in roots if os.path.exists(os.path.join(root, ".complete"))]
        if not made:
            self.skipTest("no data/recorded_corpus* (tools/make_recorded_corpus makes them)")
        for root in made:
            with self.subTest(root=root), open(os.path.join(root, "index.tsv")) as f:
                assert_training_origins_allowed(
                    self, [line.rstrip("\n").split("\t") for line in f.readlines()[1:]])

    def test_shipped_recipes_mix_only_training_splits(self):
        recipes = glob.glob(os.path.join(REPOSITORY, "recipes", "**", "trainer.cfg"),
                            recursive=True)
        self.assertTrue(recipes)
        for recipe in recipes:
            with open(recipe) as f:
                lines = [line.split("=", 1)[1].split() for line in f
                         if line.split("=", 1)[0].strip() == "dynamic_mixing_sources"]
            for path in [p for fields in lines for p in fields]:
                with self.subTest(recipe=recipe, path=path):
                    self.assertTrue(path.startswith((GENERATED_SOURCES, "data/recorded_corpus")),
                                    path)
                    self.assertTrue(os.path.basename(path).startswith("tr_"), path)


DEMO = os.path.join(REPOSITORY, "tools", "demo")
GENERATED_SOURCES = "data/corpus/sources/"
RECORDED_CORPUS = "data/recorded_corpus/"


def demo_training_lists(*options):
    """The source lists tools/demo's dynamic mixing draws from, as the demo prints them."""
    done = subprocess.run([DEMO, "--training-lists"] + list(options), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    if done.returncode != 0:
        raise AssertionError("tools/demo --training-lists failed: " + done.stderr)
    return done.stdout.split()


class DemoTrainingListsTest(unittest.TestCase):
    def test_the_demo_draws_only_from_training_splits_of_the_two_corpora(self):
        self.assertEqual(len(demo_training_lists()), 2)
        self.assertEqual(len(demo_training_lists("--synthetic-only")), 1)
        self.assertEqual(demo_training_lists("--no-dynamic-mixing"), [])
        for path in demo_training_lists() + demo_training_lists("--synthetic-only"):
            self.assertTrue(path.startswith((GENERATED_SOURCES, RECORDED_CORPUS)), path)
            self.assertTrue(os.path.basename(path).startswith("tr_"), path)

    @unittest.skipUnless(DEFAULT_CORPUS_MADE and
                         os.path.exists(os.path.join(REPOSITORY, GENERATED_SOURCES)),
                         "needs data/recorded_corpus and data/corpus (./run demo makes them)")
    def test_every_file_the_demo_trains_on_is_generated_or_from_an_allowed_package(self):
        index = {row[0]: row for row in default_index_rows()}
        recorded_rows, generated = [], 0
        for name in demo_training_lists():
            with open(os.path.join(REPOSITORY, name)) as f:
                entries = [line.split() for line in f if line.strip()]
            self.assertTrue(entries, name)
            for utterance, path in entries:
                self.assertFalse("codec2" in path or "pocketsphinx" in path, path)
                if name.startswith(RECORDED_CORPUS):
                    self.assertTrue(path.startswith(RECORDED_CORPUS), path)
                    self.assertEqual(index[utterance][2], "tr", utterance)
                    recorded_rows.append(index[utterance])
                else:
                    self.assertTrue(path.startswith(GENERATED_SOURCES), path)
                    generated += 1
        self.assertGreater(generated, 0)
        assert_training_origins_allowed(self, recorded_rows)


if __name__ == "__main__":
    unittest.main()
