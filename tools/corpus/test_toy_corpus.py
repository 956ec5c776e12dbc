"""Tests of the toy corpus generator. Run: /usr/bin/python3 -m unittest discover -s tools/corpus

The end-to-end test generates the --tiny preset twice (about 10 s) and needs espeak-ng and sox.
"""

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
import toy_content  # noqa: E402
import ideal_mask_gain  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(HERE), "make_toy_corpus")


def rms(x):
    return float(np.sqrt(np.mean(np.asarray(x, dtype=np.float64) ** 2)))


class MixingTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.RandomState(3)
        # White noise: every frame is "active", so the active level is the plain RMS.
        self.a = (rng.randn(8000) * 3000).astype(np.int16)
        self.b = (rng.randn(12000) * 300).astype(np.int16)
        self.c = (rng.randn(9000) * 1000).astype(np.int16)

    def test_mixture_is_exact_sum_cut_to_shortest(self):
        mix, (s1, s2, s3) = toy_audio.mix_sources([self.a, self.b, self.c], [1.0, -1.0, 2.0])
        self.assertEqual(len(mix), 8000)
        for s in (s1, s2, s3):
            self.assertEqual(len(s), 8000)
            self.assertEqual(s.dtype, np.int16)
        total = s1.astype(np.int64) + s2 + s3
        self.assertTrue(np.array_equal(total, mix.astype(np.int64)))

    def test_relative_level_follows_gains(self):
        for gain in (-2.5, -0.7, 0.0, 1.3, 2.5):
            _, (s1, s2) = toy_audio.mix_sources([self.a, self.b], [gain, -gain])
            # Inputs differ by 20 dB; after level normalisation only the gains remain.
            level = 20 * np.log10(rms(s1) / rms(s2))
            self.assertAlmostEqual(level, 2 * gain, delta=0.05)

    def test_joint_peak_is_ninety_percent_of_full_scale(self):
        mix, sources = toy_audio.mix_sources([self.a, self.b], [0.0, 0.0])
        peak = max(np.abs(x.astype(np.int64)).max() for x in [mix] + sources)
        self.assertAlmostEqual(peak / 32767.0, 0.9, delta=2.0 / 32767)

    def test_silent_source_is_an_error(self):
        with self.assertRaises(toy_audio.CorpusError):
            toy_audio.mix_sources([self.a, np.zeros(8000, np.int16)], [0.0, 0.0])


class SignalTest(unittest.TestCase):
    def test_trim_keeps_speech_plus_margin(self):
        tone = (8000 * np.sin(np.arange(4000) * 0.3)).astype(np.int16)
        x = np.concatenate([np.zeros(3000, np.int16), tone, np.zeros(5000, np.int16)])
        y = toy_audio.trim_silence(x)
        margin = int(0.05 * 8000)
        # Frame granularity is 10 ms = 80 samples; the tone starts and ends inside frames.
        self.assertLessEqual(abs(len(y) - (len(tone) + 2 * margin)), 160)
        self.assertGreater(rms(y), rms(tone) * 0.8)

    def test_active_rms_ignores_pauses(self):
        rng = np.random.RandomState(1)
        speech = rng.randn(4000) * 1000
        x = np.concatenate([speech, np.zeros(8000), speech]).astype(np.int16)
        self.assertAlmostEqual(toy_audio.active_rms(x), rms(speech), delta=rms(speech) * 0.02)

    def test_wav_round_trip_and_format_check(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.wav")
            x = np.arange(-500, 500, dtype=np.int16) * 30
            toy_audio.write_wav(path, x)
            y, rate = toy_audio.read_wav(path)
            self.assertEqual(rate, 8000)
            self.assertTrue(np.array_equal(x, y))
            with self.assertRaises(toy_audio.CorpusError):
                toy_audio.write_wav(path, x.astype(np.float32))

    def test_check_mixture_catches_wrong_sum_and_silence(self):
        rng = np.random.RandomState(2)
        with tempfile.TemporaryDirectory() as tmp:
            paths = [os.path.join(tmp, n + ".wav") for n in ("mix", "s1", "s2")]
            a = (rng.randn(4000) * 2000).astype(np.int16)
            b = (rng.randn(4000) * 2000).astype(np.int16)
            toy_audio.write_wav(paths[1], a)
            toy_audio.write_wav(paths[2], b)
            toy_audio.write_wav(paths[0], (a.astype(np.int32) + b).astype(np.int16))
            self.assertEqual(toy_audio.check_mixture(paths[0], paths[1:]), (4000, 0))
            wrong = a.astype(np.int32) + b
            wrong[17] += 9
            toy_audio.write_wav(paths[0], wrong.astype(np.int16))
            with self.assertRaises(toy_audio.CorpusError):
                toy_audio.check_mixture(paths[0], paths[1:])
            toy_audio.write_wav(paths[2], np.zeros(4000, np.int16))
            toy_audio.write_wav(paths[0], a)
            with self.assertRaises(toy_audio.CorpusError):
                toy_audio.check_mixture(paths[0], paths[1:])


class IdealMaskTest(unittest.TestCase):
    def test_stft_round_trip_is_exact(self):
        x = np.random.RandomState(3).randn(4000)
        spectrum = ideal_mask_gain.stft(x)
        length = (spectrum.shape[0] - 1) * ideal_mask_gain.HOP + ideal_mask_gain.FRAME
        y = ideal_mask_gain.istft(spectrum, length)
        np.testing.assert_allclose(y, x[:length], atol=1e-9)

    def test_disjoint_sources_separate_and_identical_ones_do_not(self):
        t = np.arange(16000) / 8000.0
        low, high = 8000 * np.sin(2 * np.pi * 300 * t), 8000 * np.sin(2 * np.pi * 2100 * t)
        with tempfile.TemporaryDirectory() as tmp:
            def entry(name, sources):
                paths = [os.path.join(tmp, "%s_%d.wav" % (name, i)) for i in range(3)]
                for path, x in zip(paths, [sum(sources)] + sources):
                    toy_audio.write_wav(path, np.round(x).astype(np.int16))
                return (name, paths[0], paths[1:])
            disjoint = ideal_mask_gain.measure([entry("disjoint", [low, high])])
            same = ideal_mask_gain.measure([entry("same", [low, 0.5 * low])])
        self.assertGreater(min(disjoint), 25)
        # The louder copy takes every bin, so its estimate is the mixture (gain 0 dB) and the
        # quieter one's is silence: SNR 0 dB against -6.02 dB for the mixture.
        self.assertAlmostEqual(same[0], 0.0, places=3)
        self.assertAlmostEqual(same[1], 20 * np.log10(2), places=2)


class ContentTest(unittest.TestCase):
    def test_speakers(self):
        ids = [s.id for s in toy_content.SPEAKERS]
        self.assertEqual(len(set(ids)), len(ids))
        voices = [(s.engine, s.voice, s.variant, s.pitch, s.speed) for s in toy_content.SPEAKERS]
        self.assertEqual(len(set(voices)), len(voices))
        genders = [s.gender for s in toy_content.SPEAKERS]
        self.assertEqual(genders.count("M"), genders.count("F"))
        test = {s.id for s in toy_content.speakers_for("tt")}
        train = {s.id for s in toy_content.speakers_for("tr")}
        self.assertEqual(test & train, set())
        self.assertEqual(test | train, set(ids))
        self.assertEqual({s.id for s in toy_content.speakers_for("cv")}, train)
        self.assertEqual(sorted(s.gender for s in toy_content.speakers_for("tt")),
                         ["F"] * 3 + ["M"] * 3)
        # Test voices stay unseen: no training speaker uses their variant or one derived from
        # it (steph -> steph2).
        for held_out in toy_content.speakers_for("tt"):
            for other in toy_content.speakers_for("tr"):
                self.assertNotRegex(other.variant.lower(),
                                    "^%s[0-9]*$" % held_out.variant.lower(),
                                    (held_out.id, other.id))

    def test_sentences_are_long_enough_and_reproducible(self):
        for n in (3, 8, 15):
            first = toy_content.make_sentence(toy_content.sentence_rng(5, "tr", "spk01", n, 0), n)
            again = toy_content.make_sentence(toy_content.sentence_rng(5, "tr", "spk01", n, 0), n)
            self.assertEqual(first, again)
            self.assertGreaterEqual(len(first.split()), n)
            self.assertRegex(first, r"^[A-Za-z ]+$")


def median_f0(path):
    """Median pitch in Hz of the voiced 32 ms frames of a wav (autocorrelation peak)."""
    samples, rate = toy_audio.read_wav(path)
    x = samples.astype(np.float64)
    n = int(0.032 * rate)
    lo, hi = rate // 400, rate // 60
    found = []
    for start in range(0, len(x) - n, n // 2):
        frame = x[start:start + n] - x[start:start + n].mean()
        if np.abs(frame).max() < 0.1 * np.abs(x).max():
            continue
        corr = np.correlate(frame, frame, "full")[n - 1:]
        lag = lo + int(np.argmax(corr[lo:hi]))
        if corr[lag] > 0.5 * corr[0]:
            found.append(rate / float(lag))
    return float(np.median(found))


@unittest.skipUnless(all(shutil.which(p) for p in toy_audio.ENGINE_PROGRAMS.values()),
                     "needs espeak-ng, flite and Festival")
class VoicesTest(unittest.TestCase):
    def test_every_variant_exists(self):
        toy_audio.check_variants(toy_content.SPEAKERS)
        unknown = toy_content.Speaker("spk99", "F", "en", "female2", 50, 160)
        with self.assertRaisesRegex(toy_audio.CorpusError, "spk99.*female2"):
            toy_audio.check_variants([unknown])

    def test_voices_sound_like_their_gender(self):
        # Format 2 listed 7 women who spoke with espeak-ng's default male voice (about 100 Hz).
        text = "the quiet teacher carried a golden basket behind the old station"
        with tempfile.TemporaryDirectory() as tmp:
            for speaker in toy_content.SPEAKERS:
                # As the corpus has them: resampled, Festival's pitch shifts applied.
                path = os.path.join(tmp, speaker.id + ".wav")
                toy_audio.synthesise(speaker, text, path, 0.0, 60.0)
                f0 = median_f0(path)
                if speaker.gender == "M":
                    self.assertLess(f0, 140, speaker)
                else:
                    self.assertGreater(f0, 145, speaker)


@unittest.skipUnless(shutil.which("espeak-ng") and shutil.which("sox"), "needs espeak-ng and sox")
class EndToEndTest(unittest.TestCase):
    def run_script(self, cwd, *args):
        return subprocess.run([SCRIPT] + list(args), cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True)

    def test_tiny_corpus(self):
        with tempfile.TemporaryDirectory() as tmp:
            runs = []
            for name in ("one", "two"):
                cwd = os.path.join(tmp, name)
                os.makedirs(cwd)
                done = self.run_script(cwd, "--tiny", "--root=corpus", "--seed=4")
                self.assertEqual(done.returncode, 0, done.stdout)
                runs.append(cwd)
            one, two = runs
            set_dir = os.path.join("corpus", "2speakers", "wav8k", "min", "tr")
            with open(os.path.join(one, set_dir, "mix_wav.scp")) as f:
                mix_lines = f.read().splitlines()
            self.assertEqual(len(mix_lines), 24)
            # Paths are relative to the working directory, as --root was given.
            name, path = mix_lines[0].split(" ")
            self.assertTrue(path.startswith(set_dir + "/mix/"))
            with open(os.path.join(one, set_dir, "utt_spkinfo.txt")) as f:
                fields = f.readline().split(" ")
            self.assertEqual(fields[0], name)
            self.assertEqual(fields[1], path)
            self.assertIn(fields[3].strip(), ("M", "F"))
            with open(os.path.join(one, "corpus", "3speakers", "wav8k", "min", "tt",
                                   "allS_wav.scp")) as f:
                self.assertEqual([len(l.split(" ")) for l in f], [4] * 4)
            # Each split's sources as Kaldi-style lists for dynamic mixing, as index.tsv says.
            with open(os.path.join(one, "corpus", "sources", "index.tsv")) as f:
                rows = [l.rstrip("\n").split("\t") for l in f][1:]
            with open(os.path.join(one, "corpus", "sources", "tr_wav.scp")) as f:
                wav_scp = [l.split() for l in f]
            with open(os.path.join(one, "corpus", "sources", "tr_utt2spk")) as f:
                utt2spk = dict(l.split() for l in f)
            train = [r for r in rows if r[2] == "tr"]
            self.assertEqual(sorted(p for _, p in wav_scp), sorted(r[0] for r in train))
            for utterance, path in wav_scp:
                self.assertEqual(os.path.basename(path), utterance + ".wav")
                self.assertTrue(os.path.exists(os.path.join(one, path)), path)
                self.assertEqual(utt2spk[utterance], path.split("/")[-2])
            # Phone transcriptions of the same utterances, every phone in the inventory, and
            # the training speakers (the byte comparison below makes them deterministic).
            with open(os.path.join(one, "corpus", "sources", "tr_phones.txt")) as f:
                phones = dict((l.split()[0], l.split()[1:]) for l in f)
            with open(os.path.join(one, "corpus", "sources", "phones.txt")) as f:
                inventory = set(f.read().split())
            self.assertEqual(sorted(phones), sorted(u for u, _ in wav_scp))
            for utterance, sequence in phones.items():
                self.assertGreater(len(sequence), 5, utterance)
                self.assertTrue(set(sequence) <= inventory, utterance)
                self.assertFalse(any("'" in p or "_" in p for p in sequence), sequence)
            with open(os.path.join(one, "corpus", "sources", "tr_speakers.txt")) as f:
                self.assertEqual(f.read().split(), sorted(set(utt2spk.values())))
            # Same seed, same bytes, wherever it runs.
            for folder, _, files in os.walk(os.path.join(one, "corpus")):
                for file in files:
                    mine = os.path.join(folder, file)
                    other = os.path.join(two, os.path.relpath(mine, one))
                    with open(mine, "rb") as a, open(other, "rb") as b:
                        self.assertEqual(a.read(), b.read(), mine)
            again = self.run_script(one, "--tiny", "--root=corpus", "--seed=4")
            self.assertIn("nothing to do", again.stdout)
            checked = self.run_script(one, "--verify", "--root=corpus")
            self.assertEqual(checked.returncode, 0, checked.stdout)


if __name__ == "__main__":
    unittest.main()
