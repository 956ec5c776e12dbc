"""Pure helpers of tools/make_recorded_corpus: which allowed Debian package file is which speaker,
cutting recordings at pauses, packing short clips into utterances, and the measurements that
reject clips which are not one clean voice. Standard library + numpy only; no file is written
here, so everything is testable on synthetic signals (test_recorded_corpus.py)."""

import os
import re

import numpy as np

RATE = 8000
FRAME = RATE // 100                 # 10 ms frames for pause detection
MIN_SECONDS, MAX_SECONDS = 2.0, 12.0
PAUSE_SECONDS = 0.3                 # a pause at least this long may end an utterance
# Pieces of a clip shorter than MIN_SECONDS (a word, a letter, a hedgehog's shout) are packed per
# speaker, in file order, with GAP_SECONDS of silence between them, until TARGET_SECONDS.
GAP_SECONDS = 0.25
TARGET_SECONDS = 5.0
MIN_FRAGMENT_SECONDS = 0.25         # less speech than this is a click or a breath, not a word
SPEECH_FLOOR_DB = -40.0             # a frame is speech within 40 dB of the clip's loudest frame
ABSOLUTE_FLOOR_DBFS = -60.0         # ... and above this, so digital near-silence is never speech


# --- which file is whom -------------------------------------------------------------------------

# The only packages whose recordings may be trained on (issue 33). Every input file must lie under
# one of these folders AND be listed by dpkg as belonging to the package (both are checked).
ALLOWED_PACKAGES = {
    "tuxpaint-stamps-default": ("/usr/share/tuxpaint/stamps/",),
    "fillets-ng-data": ("/usr/share/games/fillets-ng/",),
    "fillets-ng-data-cs": ("/usr/share/games/fillets-ng/",),
    "fillets-ng-data-nl": ("/usr/share/games/fillets-ng/",),
    "klettres-data": ("/usr/share/klettres/",),
    "ktuberling-data": ("/usr/share/ktuberling/sounds/",),
    "hedgewars-data": ("/usr/share/games/hedgewars/Data/Sounds/voices/",),
    # Added by issue 79 (data/README.md, "More speakers"): training only, never held out.
    "festvox-ru": ("/usr/share/festival/voices/russian/msu_ru_nsh_clunits/wav/",),
    "gcin-voice": ("/usr/share/gcin-voice/ogg/",),
    "kajongg": ("/usr/share/kajongg/voices/",),
}
# What a corpus reads when --packages is not given: the seven the corpus was first made of, so
# that the default corpus (and every figure measured on it) stays as it was; `--packages=all`
# reads every allowed package.
DEFAULT_PACKAGES = ("fillets-ng-data", "fillets-ng-data-cs", "fillets-ng-data-nl",
                    "hedgewars-data", "klettres-data", "ktuberling-data",
                    "tuxpaint-stamps-default")
# Packages whose speakers always train: the held-out splits are drawn without them, so a corpus
# with them holds out exactly the speakers of the corpus without them.
TRAIN_ONLY_PACKAGES = ("festvox-ru", "gcin-voice", "kajongg")
# Packages that are evaluation only, named so that the guard's message can say why.
EVALUATION_ONLY = ("codec2-examples", "pocketsphinx-testdata")
AUDIO_SUFFIXES = (".ogg", ".wav", ".flac")


def allowed_prefix(package, path):
    """True if path lies under one of the fixed folders of an allowed package."""
    return any(path.startswith(prefix) for prefix in ALLOWED_PACKAGES.get(package, ()))


def _safe(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def speaker_of(package, path):
    """(speaker id, language) of one package file, or (None, why not) when the file is not a
    voice this corpus can attribute to one person (music, effects, minor characters).

    The identities (data/README.md, "Recorded training corpus"):
    - tuxpaint-stamps-default: <stamp>_desc_<lang>.ogg are spoken descriptions; the changelog
      credits one reader per language (fr: Jacques Chion and PaulK, so French is less sure).
      Numbers and letters (stamps/symbols/) were credited separately in places (Schoolsplay,
      John Arundel), but their median F0 matches the same language's other stamps within 5% in
      all seven languages that have both, so they are the same speaker; a clip by someone else
      falls to the other_voice rule. _desc.ogg without a language is English.
    - fillets-ng-data(-cs, -nl): sound/<level>/<lang>/<prefix>-<actor>-<line>.ogg; actor m is the
      small fish and v the big fish, one actor each per language. Other actor codes are minor
      characters (parrot, skull, robots...) whose actors are not credited: left out.
    - klettres-data: <lang>/{alpha,syllab}/: one reader per language folder.
    - ktuberling-data: sounds/<lang>/: one reader per language folder.
    - hedgewars-data: Sounds/voices/<pack>/: one voice pack, one speaker.
    - festvox-ru: the recordings of Festival's Russian voice msu_ru_nsh, one reader (nsh).
    - gcin-voice: ogg/<syllable>/3.ogg by Edward Der-Hua Liu and 5.ogg by Chu Lo (its
      copyright file): two speakers of single Mandarin syllables.
    - kajongg: voices/[de/]<voice>/: four voices each in English and German (female1, female2,
      male1, male2), all by the game's author's recording; whether the German voices are the
      English ones' speakers is not said, so they are eight labels of four to eight people.
    """
    name = os.path.basename(path)
    stem, suffix = os.path.splitext(name)
    if suffix.lower() not in AUDIO_SUFFIXES:
        return None, "not audio"
    parts = path.split("/")
    if package == "tuxpaint-stamps-default":
        match = re.match(r".*_desc(?:_([A-Za-z@]+))?$", stem)
        if not match:
            return None, "sound effect"
        language = match.group(1) or "en"
        return "tux_%s" % _safe(language), language
    if package.startswith("fillets-ng-data"):
        if "/sound/" not in path or len(parts) < 3:
            return None, "music"
        language = parts[-2]
        fields = stem.split("-")
        if language not in ("cs", "nl", "en") or len(fields) < 3 or fields[1] not in ("m", "v"):
            return None, "minor character or effect"
        return "fil_%s_%s" % (language, fields[1]), language
    if package == "klettres-data":
        language = path[len("/usr/share/klettres/"):].split("/")[0]
        return "kle_%s" % _safe(language), language
    if package == "ktuberling-data":
        language = parts[-2]
        return "ktu_%s" % _safe(language), language
    if package == "hedgewars-data":
        pack = parts[-2]
        languages = {"es": "es", "pl": "pl", "ru": "ru", "uk": "uk"}
        language = languages.get(pack.rsplit("_", 1)[-1], "ru" if pack == "Russian" else "en")
        return "hw_%s" % _safe(pack), language
    if package == "festvox-ru":
        return "fvr_nsh", "ru"
    if package == "gcin-voice":
        if stem not in ("3", "5"):
            return None, "unknown reader"
        return "gci_%s" % stem, "zh"
    if package == "kajongg":
        rest = path[len("/usr/share/kajongg/voices/"):].split("/")
        language, voice = ("de", rest[1]) if rest[0] == "de" and len(rest) == 3 else ("en", rest[0])
        return "kaj_%s_%s" % (language, _safe(voice)), language
    return None, "package not allowed"


# --- cutting at pauses --------------------------------------------------------------------------

def frame_energies(x, frame=FRAME):
    x = np.asarray(x, dtype=np.float64)
    n = len(x) // frame
    if n == 0:
        return np.zeros(0)
    return (x[: n * frame].reshape(n, frame) ** 2).mean(axis=1)


def speech_frames(x, frame=FRAME):
    """Boolean per frame: within |SPEECH_FLOOR_DB| of the loudest frame and above the absolute
    floor (full scale is 32768)."""
    energy = frame_energies(x, frame)
    if len(energy) == 0 or energy.max() <= 0:
        return np.zeros(len(energy), dtype=bool)
    floor = max(energy.max() * 10 ** (SPEECH_FLOOR_DB / 10.0),
                32768.0 ** 2 * 10 ** (ABSOLUTE_FLOOR_DBFS / 10.0))
    return energy >= floor


def speech_runs(active, min_pause):
    """[a, b) frame ranges of speech separated by at least min_pause inactive frames."""
    runs, start, last, silent = [], None, None, 0
    for i, on in enumerate(active):
        if on:
            if start is None:
                start = i
            last, silent = i, 0
        elif start is not None:
            silent += 1
            if silent >= min_pause:
                runs.append((start, last + 1))
                start = None
    if start is not None:
        runs.append((start, last + 1))
    return runs


def cut_at_pauses(x, rate=RATE):
    """Splits one clip into (utterances, fragments): lists of (start, end) samples.

    Runs of speech separated by PAUSE_SECONDS or more are joined greedily while the piece stays
    within MAX_SECONDS; a single run longer than that is cut at its quietest frame (at least
    MIN_SECONDS from either end). Pieces of MIN_SECONDS or more are utterances; shorter ones with
    at least MIN_FRAGMENT_SECONDS of speech are fragments, to be packed with others of the same
    speaker (pack_fragments). Each piece keeps 50 ms of margin on both sides.
    """
    frame = rate // 100
    energy = frame_energies(x, frame)
    active = speech_frames(x, frame)
    runs = speech_runs(active, int(round(PAUSE_SECONDS * 100)))
    longest = int(MAX_SECONDS * 100) - 10          # room for the margins
    shortest = int(MIN_SECONDS * 100)

    def cut(a, b):
        if b - a <= longest:
            return [(a, b)]
        lo, hi = a + shortest, b - shortest
        middle = lo + int(np.argmin(energy[lo:hi])) if hi > lo else (a + b) // 2
        return cut(a, middle) + cut(middle, b)

    pieces, current = [], None
    for a, b in runs:
        if current and b - current[0] <= longest:
            current = (current[0], b)
        else:
            if current:
                pieces.extend(cut(*current))
            current = (a, b)
    if current:
        pieces.extend(cut(*current))
    margin = rate // 20
    utterances, fragments = [], []
    for a, b in pieces:
        start, end = max(0, a * frame - margin), min(len(x), b * frame + margin)
        if end - start >= MIN_SECONDS * rate:
            utterances.append((start, end))
        elif active[a:b].sum() * frame >= MIN_FRAGMENT_SECONDS * rate:
            fragments.append((start, end))
    return utterances, fragments


def pack_fragments(lengths, rate=RATE):
    """Groups consecutive fragments (their lengths in samples, in a fixed order) into utterances:
    a group closes once it reaches TARGET_SECONDS with GAP_SECONDS between its fragments; a
    fragment that would push it past MAX_SECONDS starts the next group. A last group shorter than
    MIN_SECONDS joins the previous one if that stays within MAX_SECONDS, else it is dropped.
    Returns lists of indices."""
    gap = int(GAP_SECONDS * rate)
    groups, current, total = [], [], 0
    for i, length in enumerate(lengths):
        added = length + (gap if current else 0)
        if current and total + added > MAX_SECONDS * rate:
            groups.append(current)
            current, total, added = [], 0, length
        current.append(i)
        total += added
        if total >= TARGET_SECONDS * rate:
            groups.append(current)
            current, total = [], 0
    if current:
        if total >= MIN_SECONDS * rate:
            groups.append(current)
        elif groups and group_samples([lengths[j] for j in groups[-1] + current], rate) \
                <= MAX_SECONDS * rate:
            groups[-1] = groups[-1] + current
    return groups


def group_samples(lengths, rate=RATE):
    return sum(lengths) + int(GAP_SECONDS * rate) * max(0, len(lengths) - 1)


def join_fragments(pieces, rate=RATE):
    """The int16 utterance of packed fragments: each followed by GAP_SECONDS of silence."""
    gap = np.zeros(int(GAP_SECONDS * rate), dtype=np.int16)
    out = []
    for i, piece in enumerate(pieces):
        if i:
            out.append(gap)
        out.append(np.asarray(piece, dtype=np.int16))
    return np.concatenate(out)


# --- is it one clean voice? ---------------------------------------------------------------------

def clipped_fraction(x):
    """Fraction of samples in runs of 3 or more at the clip's largest magnitude, when that is
    within 1 dB of full scale: flat tops of a clipped recording (one extreme sample is not)."""
    at_peak = _at_peak(x)
    if at_peak is None:
        return 0.0
    # Samples whose neighbours on both sides are at the peak too: the middle of a flat run.
    inner = at_peak[1:-1] & at_peak[:-2] & at_peak[2:]
    return float(inner.sum()) / len(x)


def _at_peak(x):
    """Mask of the samples at the clip's largest magnitude (within 1), or None when that is more
    than 1 dB below full scale (or the clip is empty): nothing can be clipped."""
    magnitude = np.abs(np.asarray(x, dtype=np.int32))
    if len(magnitude) == 0 or magnitude.max() < 32767 * 10 ** (-1 / 20.0):
        return None
    return magnitude >= magnitude.max() - 1


def clipped_runs(x):
    """[(start, end)] of the flat runs clipped_fraction counts: 3 or more samples at the clip's
    largest magnitude (within 1), when that is within 1 dB of full scale."""
    x = np.asarray(x, dtype=np.int32)
    at_peak = _at_peak(x)
    if at_peak is None:
        return []
    at_peak = at_peak.astype(np.int8)
    # A run ends where the sign flips too: a full-scale swing from + to - is two runs.
    edges = np.flatnonzero(np.diff(np.concatenate([[0], at_peak, [0]])))
    runs = []
    for a, b in zip(edges[::2], edges[1::2]):
        signs = np.sign(x[a:b])
        cuts = [a] + [a + 1 + i for i in np.flatnonzero(signs[1:] != signs[:-1])] + [b]
        runs += [(c, d) for c, d in zip(cuts[:-1], cuts[1:]) if d - c >= 3]
    return runs


def _slope(at, one_away, two_away):
    """The slope at a sample, going away from its neighbours one and two samples off: the
    one-sided second-order difference, the first-order one with one neighbour, 0 with none."""
    if one_away is None:
        return 0.0
    if two_away is None:
        return at - one_away
    return 1.5 * at - 2 * one_away + 0.5 * two_away


def repair_clipping(x, max_run):
    """x (int16 samples) with every flat run clipped_runs finds replaced by the cubic through its
    two neighbours that meets their values and slopes (Hermite; slopes from up to three samples
    on each side), never inside the clipping level: the rounded top a clipped waveform lost. Returns
    float64 samples, which may exceed full scale, or None when a run is longer than max_run
    samples (a cubic cannot stand in for a whole lost half-period)."""
    y = np.asarray(x, dtype=np.float64).copy()
    for a, b in clipped_runs(x):
        if b - a > max_run:
            return None
        level = y[a]
        # Neighbours: the sample on each side and its slope, from the three samples on that side
        # (exact on a parabola), two near an edge; a run at either end of the clip keeps its
        # level on that side: there is no slope to follow.
        p0 = y[a - 1] if a >= 1 else level
        m0 = _slope(p0, y[a - 2] if a >= 2 else None,
                    y[a - 3] if a >= 3 else None) if a >= 1 else 0.0
        p1 = y[b] if b < len(y) else level
        m1 = -_slope(p1, y[b + 1] if b + 1 < len(y) else None,
                     y[b + 2] if b + 2 < len(y) else None)
        # Unit steps: t runs over the run's samples between the neighbours at 0 and 1.
        span = float(b - a + 1)
        t = np.arange(1, b - a + 1) / span
        h00, h10 = 2 * t ** 3 - 3 * t ** 2 + 1, t ** 3 - 2 * t ** 2 + t
        h01, h11 = -2 * t ** 3 + 3 * t ** 2, t ** 3 - t ** 2
        cubic = h00 * p0 + h10 * span * m0 + h01 * p1 + h11 * span * m1
        y[a:b] = np.maximum(cubic, level) if level > 0 else np.minimum(cubic, level)
    return y


def voice_features(x, rate=RATE):
    """Measures of one clip at 8 kHz, over its speech frames (40 ms, hop 20 ms, within 30 dB of
    the loudest): voiced fraction (normalised autocorrelation peak > 0.5 at a lag of 60-400 Hz),
    median F0 and its spread (interquartile range in semitones) over voiced frames, median
    spectral flatness (300-3400 Hz), the ratio in dB of loud (95th percentile) to quiet (10th
    percentile) 20 ms frames, and the seconds of speech."""
    x = np.asarray(x, dtype=np.float64)
    length, hop = rate // 25, rate // 50
    result = dict(voiced=0.0, f0=0.0, f0_spread=0.0, flatness=1.0, dynamic_db=0.0, speech=0.0)
    if len(x) < length:
        return result
    count = 1 + (len(x) - length) // hop
    index = np.arange(length)[None, :] + hop * np.arange(count)[:, None]
    frames = x[index]
    frames = frames - frames.mean(axis=1, keepdims=True)
    power = (frames ** 2).mean(axis=1)
    if power.max() <= 0:
        return result
    loud = power >= power.max() * 10 ** (-30 / 10.0)
    quiet = np.percentile(power, 10)
    result["dynamic_db"] = float(10 * np.log10(np.percentile(power, 95) / max(quiet, 1.0)))
    frames = frames[loud]
    result["speech"] = float(loud.sum()) * hop / rate
    window = np.hanning(length)
    spectrum = np.abs(np.fft.rfft(frames * window, 2 * length, axis=1)) ** 2
    correlation = np.fft.irfft(spectrum, axis=1)[:, :length]
    lo, hi = rate // 400, rate // 60
    lags = lo + np.argmax(correlation[:, lo:hi], axis=1)
    peaks = correlation[np.arange(len(frames)), lags] / np.maximum(correlation[:, 0], 1e-9)
    voiced = peaks > 0.5
    result["voiced"] = float(voiced.mean())
    if voiced.any():
        f0 = rate / lags[voiced].astype(np.float64)
        result["f0"] = float(np.median(f0))
        semitones = 12 * np.log2(f0)
        result["f0_spread"] = float(np.percentile(semitones, 75) - np.percentile(semitones, 25))
    bins = np.fft.rfftfreq(2 * length, 1.0 / rate)
    band = spectrum[:, (bins >= 300) & (bins <= 3400)] + 1e-9
    flatness = np.exp(np.log(band).mean(axis=1)) / band.mean(axis=1)
    result["flatness"] = float(np.median(flatness))
    return result
