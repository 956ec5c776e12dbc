"""Audio side of the toy corpus: synthesis (espeak-ng, flite or Festival, then sox), 16-bit wav
I/O, levels, mixing and the checks a finished corpus must pass. Standard library + numpy only."""

import glob
import os
import shutil
import subprocess
import tempfile
import wave

import numpy as np

from toy_content import FESTIVAL_WPM, FLITE_WPM

RATE = 8000
FULL_SCALE = 32768.0
# wsj0-2mix's create_wav_2speakers.m rescales mixture and sources jointly so that the largest
# absolute sample is 0.9 of full scale.
PEAK = 0.9
# Bump when the processing of a cached source changes, so stale cache files are not reused.
SOURCE_PROCESSING_VERSION = 1
# The program each engine runs, and the Debian packages that provide it and its voices.
ENGINE_PROGRAMS = {"espeak-ng": "espeak-ng", "flite": "flite", "festival": "text2wave"}
FESTIVAL_VOICE_PACKAGES = ("festvox-kdlpc16k festvox-italp16k festvox-itapc16k festvox-ca-ona-hts "
                           "festvox-czech-dita festvox-suopuhe-lj festvox-suopuhe-mv")
ENGINE_PACKAGES = {"espeak-ng": "espeak-ng", "flite": "flite",
                   "festival": "festival " + FESTIVAL_VOICE_PACKAGES}


class CorpusError(Exception):
    pass


def read_wav(path):
    """int16 samples and the rate of a 16-bit mono PCM wav; anything else is an error."""
    try:
        with wave.open(path, "rb") as w:
            if w.getnchannels() != 1 or w.getsampwidth() != 2:
                raise CorpusError("%s: expected 16-bit mono, got %d channel(s) of %d byte(s)"
                                  % (path, w.getnchannels(), w.getsampwidth()))
            data = w.readframes(w.getnframes())
            return np.frombuffer(data, dtype="<i2"), w.getframerate()
    except (wave.Error, EOFError) as error:
        raise CorpusError("%s: not a readable PCM wav (%s)" % (path, error))


def write_wav(path, samples, rate=RATE):
    """Writes int16 samples atomically (temp file + rename), so a killed run leaves no torn file."""
    samples = np.asarray(samples)
    if samples.dtype != np.int16:
        raise CorpusError("write_wav wants int16 samples, got %s" % samples.dtype)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with wave.open(tmp, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.astype("<i2").tobytes())
    os.replace(tmp, path)


def frame_energies(x, frame):
    """Mean power of non-overlapping frames (the tail shorter than a frame is ignored)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x) // frame
    if n == 0:
        return np.zeros(0)
    return (x[: n * frame].reshape(n, frame) ** 2).mean(axis=1)


def trim_silence(x, rate=RATE, floor_db=-40.0, margin=0.05):
    """Cuts the leading/trailing silence espeak-ng leaves, keeping `margin` seconds each side.

    A 10 ms frame is speech when its power is within |floor_db| of the loudest frame.
    """
    frame = rate // 100
    energy = frame_energies(x, frame)
    if len(energy) == 0 or energy.max() <= 0:
        return x[:0]
    active = np.nonzero(energy >= energy.max() * 10 ** (floor_db / 10))[0]
    pad = int(margin * rate)
    start = max(0, active[0] * frame - pad)
    end = min(len(x), (active[-1] + 1) * frame + pad)
    return x[start:end]


def active_rms(x, rate=RATE, floor_db=-30.0):
    """RMS over the 20 ms frames within |floor_db| of the loudest one: a simple stand-in for the
    ITU-T P.56 active speech level that wsj0-2mix normalises with, so pauses do not count."""
    energy = frame_energies(x, rate // 50)
    if len(energy) == 0 or energy.max() <= 0:
        return 0.0
    return float(np.sqrt(energy[energy >= energy.max() * 10 ** (floor_db / 10)].mean()))


def mix_sources(sources, gains_db, rate=RATE):
    """wsj0-2mix "min" mixing of int16 sources. Returns (mixture, scaled sources), all int16.

    Each source is brought to the same active level, scaled by its gain in dB, all are cut to the
    shortest, and everything is rescaled jointly so the largest peak of mixture and sources is
    PEAK of full scale. The mixture is the exact sum of the stored int16 sources (the original
    rounds each file separately and is off by a few LSB; exactness costs nothing here).
    """
    if len(sources) != len(gains_db) or len(sources) < 2:
        raise CorpusError("need at least two sources and one gain per source")
    length = min(len(s) for s in sources)
    scaled = []
    for source, gain in zip(sources, gains_db):
        level = active_rms(source, rate)
        if level <= 0:
            raise CorpusError("silent source")
        scaled.append(source[:length].astype(np.float64) / level * 10 ** (gain / 20.0))
    mixture = np.sum(scaled, axis=0)
    peak = max(np.abs(mixture).max(), max(np.abs(s).max() for s in scaled))
    factor = PEAK * (FULL_SCALE - 1) / peak
    quantised = [np.round(s * factor).astype(np.int16) for s in scaled]
    total = np.sum([q.astype(np.int32) for q in quantised], axis=0)
    # |total| <= PEAK*32767 + rounding of each source: always inside int16.
    return total.astype(np.int16), quantised


def synthesise(speaker, text, out_path, min_seconds, max_seconds):
    """Speaks `text` with the speaker's voice, resamples to 8 kHz 16-bit mono, trims silence and
    writes out_path if the duration is within [min_seconds, max_seconds].

    Returns the trimmed duration in seconds (also when out of range, then nothing is written).
    An existing out_path is a cache hit: its name is a hash of everything that made it.
    """
    if os.path.exists(out_path):
        samples, _ = read_wav(out_path)
        return len(samples) / float(RATE)
    with tempfile.TemporaryDirectory(prefix="toycorpus") as tmp:
        raw = os.path.join(tmp, "spoken.wav")
        resampled = os.path.join(tmp, "8k.wav")
        speak(speaker, text, raw)
        # -R -D: no dither and fixed seeds, otherwise sox output differs from run to run.
        # -G guards against clipping in the resampler.
        effects = ["rate", str(RATE)]
        if speaker.engine == "festival" and speaker.pitch:
            effects = ["pitch", str(speaker.pitch)] + effects
        run(["sox", "-R", "-D", "-G", raw, "-b", "16", "-c", "1", "-e", "signed-integer",
             resampled] + effects)
        samples, rate = read_wav(resampled)
    if rate != RATE:
        raise CorpusError("sox produced %d Hz instead of %d" % (rate, RATE))
    samples = trim_silence(samples)
    seconds = len(samples) / float(RATE)
    if min_seconds <= seconds <= max_seconds:
        write_wav(out_path, samples)
    return seconds


def speak(speaker, text, path):
    """Writes the speaker's rendering of text to the wav path, at the engine's own rate."""
    # Argument lists, no shell; stderr is dropped because espeak-ng may print ALSA noise.
    if speaker.engine == "flite":
        options = ["--setf", "duration_stretch=%.4f" % (FLITE_WPM / float(speaker.speed))]
        if speaker.pitch:
            options += ["--setf", "int_f0_target_mean=%d" % speaker.pitch]
        run(["flite", "-voice", speaker.voice] + options + ["-t", text, "-o", path])
    elif speaker.engine == "festival":
        text_path = path + ".txt"
        with open(text_path, "w") as f:
            f.write(text + "\n")
        stretch = FESTIVAL_WPM / float(speaker.speed)
        run(["text2wave", "-eval", "(voice_%s)" % speaker.voice,
             "-eval", "(Parameter.set 'Duration_Stretch %.4f)" % stretch, "-o", path, text_path])
        os.remove(text_path)
    else:
        run(["espeak-ng", "-v", "%s+%s" % (speaker.voice, speaker.variant),
             "-p", str(speaker.pitch), "-s", str(speaker.speed), "-w", path, text])


# espeak-ng's phoneme mnemonics (-x) mark stress and syllable boundaries with these characters;
# they are not phones.
_PHONEME_MARKS = "',;%=_|"


def phonemes(speaker, text):
    """The phones of `text` as espeak-ng's -x mnemonics, one list entry per phone, stress marks
    removed. espeak-ng voices give the phones of their own accent, which is what they speak;
    flite and Festival voices are transcribed with espeak-ng's en-us (an approximation of
    their own lexicons)."""
    language = speaker.voice if speaker.engine == "espeak-ng" else "en-us"
    done = subprocess.run(["espeak-ng", "-q", "-x", "--sep=_", "-v", language, text],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    if done.returncode != 0:
        raise CorpusError("espeak-ng -x failed on '%s' (exit %d)" % (text, done.returncode))
    phones = []
    for word in done.stdout.split():
        for phone in word.split("_"):
            phone = "".join(c for c in phone if c not in _PHONEME_MARKS)
            if phone:
                phones.append(phone)
    if not phones:
        raise CorpusError("espeak-ng gave no phonemes for '%s'" % text)
    return phones


def check_variants(speakers, probe="one two three"):
    """Raises CorpusError for a speaker whose espeak-ng variant does not exist.

    espeak-ng does not fail on an unknown variant: it speaks with the language's default voice
    and exits 0. So each variant is recognised by its output differing from that default.
    """
    with tempfile.TemporaryDirectory(prefix="toyvoices") as tmp:
        def speak(voice):
            path = os.path.join(tmp, voice.replace("+", "_") + ".wav")
            if not os.path.exists(path):
                run(["espeak-ng", "-v", voice, "-w", path, probe])
            with open(path, "rb") as f:
                return f.read()
        flite_voices = None
        festival_voices = None
        for speaker in speakers:
            if speaker.engine == "festival":
                if festival_voices is None:
                    festival_voices = festival_voice_names()
                if speaker.voice not in festival_voices:
                    raise CorpusError("%s: Festival has no voice '%s' (installed: %s; apt-get "
                                      "install -y %s)" % (speaker.id, speaker.voice,
                                                          " ".join(festival_voices),
                                                          FESTIVAL_VOICE_PACKAGES))
                continue
            if speaker.engine == "flite":
                if flite_voices is None:
                    flite_voices = flite_voice_names()
                if speaker.voice not in flite_voices:
                    raise CorpusError("%s: flite has no voice '%s' (flite -lv lists: %s)"
                                      % (speaker.id, speaker.voice, " ".join(flite_voices)))
                continue
            if speak("%s+%s" % (speaker.voice, speaker.variant)) == speak(speaker.voice):
                raise CorpusError("%s: espeak-ng has no voice variant '%s' (it would silently "
                                  "use its default voice); variants are the file names under "
                                  "espeak-ng-data/voices/!v" % (speaker.id, speaker.variant))


def flite_voice_names():
    try:
        done = subprocess.run(["flite", "-lv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True)
    except FileNotFoundError:
        raise CorpusError("flite is not installed (apt-get install -y flite)")
    # "Voices available: kal awb_time kal16 awb rms slt"
    return done.stdout.split(":", 1)[-1].split()


def festival_voice_names():
    """Festival's installed voices: the folders under its voices/<language>/ directories."""
    if not shutil.which("text2wave"):
        raise CorpusError("Festival is not installed (apt-get install -y %s)"
                          % ENGINE_PACKAGES["festival"])
    names = []
    for language in glob.glob("/usr/share/festival/voices/*"):
        names += [os.path.basename(v) for v in glob.glob(os.path.join(language, "*"))
                  if os.path.isdir(v)]
    return sorted(names)


def run(command):
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise CorpusError("%s is not installed (apt-get install -y espeak-ng sox)" % command[0])
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CorpusError("%s failed (exit %d): %s" % (command[0], done.returncode,
                                                         message[-1] if message else "no message"))


def check_mixture(mix_path, source_paths, min_source_dbfs=-45.0, min_active_fraction=0.2,
                  expected_rate=RATE):
    """Checks one listed mixture from its files; returns (num_samples, max |mix - sum|).

    The sum must match within int16 rounding (one LSB per source); every source must be at
    expected_rate (8 kHz by default),
    as long as the mixture and not silent: its RMS above min_source_dbfs and at least
    min_active_fraction of its 20 ms frames within 30 dB of its loudest frame.
    """
    mix, rate = read_wav(mix_path)
    if rate != expected_rate:
        raise CorpusError("%s: %d Hz, expected %d" % (mix_path, rate, expected_rate))
    total = np.zeros(len(mix), dtype=np.int64)
    for path in source_paths:
        source, rate = read_wav(path)
        if rate != expected_rate:
            raise CorpusError("%s: %d Hz, expected %d" % (path, rate, expected_rate))
        if len(source) != len(mix):
            raise CorpusError("%s: %d samples, mixture %s has %d"
                              % (path, len(source), mix_path, len(mix)))
        rms = np.sqrt(np.mean(source.astype(np.float64) ** 2))
        if rms <= 0 or 20 * np.log10(rms / FULL_SCALE) < min_source_dbfs:
            raise CorpusError("%s: source is (nearly) silent" % path)
        energy = frame_energies(source, expected_rate // 50)
        if np.mean(energy >= energy.max() * 1e-3) < min_active_fraction:
            raise CorpusError("%s: source has too little speech" % path)
        total += source
    error = int(np.abs(total - mix.astype(np.int64)).max())
    if error > len(source_paths):
        raise CorpusError("%s is not the sum of its sources (max difference %d)"
                          % (mix_path, error))
    return len(mix), error
