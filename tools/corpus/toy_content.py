"""What the toy corpus says and who says it: the synthetic speakers and a sentence generator.

Used by tools/make_toy_corpus. Only the standard library, so the text side can be tested alone.
"""

import random
from collections import namedtuple

# One synthetic speaker = an espeak-ng language voice (accent) + a voice variant (formants, pitch
# range, gender) + the -p pitch and -s speed (words per minute) options.
#
# The variant must be the exact file name under espeak-ng-data/voices/!v: espeak-ng silently
# falls back to its default male voice for an unknown one (corpus format 2 lost 12 of its 40
# speakers that way, 7 of them listed as women). make_toy_corpus checks every variant first.
# steph2 and steph3 are left out: they are copies of the test voice steph with small changes.
#
# A flite speaker (engine "flite") is one of flite's voices (slt, awb, rms, kal: voices built from
# recordings of real people, so more natural than espeak-ng's formant synthesis) with a target
# mean F0 in Hz as its pitch (0: the voice's own; rms ignores it) and a speaking rate in words per
# minute as its speed (flite's duration_stretch = FLITE_WPM / speed).
#
# A festival speaker (engine "festival") is one of Festival's diphone or HTS voices, built from
# recordings of real people, most in other languages (Italian, Czech, Finnish, Catalan). They read
# our English text with their own letter-to-sound rules, which is fine for separation, and they
# add women other than slt. Its pitch is a shift in cents applied by sox (formants kept), its
# speed words per minute (Festival's Duration_Stretch = FESTIVAL_WPM / speed; HTS voices ignore
# it).
Speaker = namedtuple("Speaker", "id gender voice variant pitch speed engine",
                     defaults=("espeak-ng",))
ENGINES = ("espeak-ng", "flite", "festival")
FLITE_WPM = 170
FESTIVAL_WPM = 170

SPEAKERS = [
    # Training and cv: 24 men, each with his own variant.
    Speaker("spk01", "M", "en-us", "m1", 35, 150),
    Speaker("spk02", "M", "en", "m2", 47, 165),
    Speaker("spk03", "M", "en-gb-scotland", "m3", 59, 180),
    Speaker("spk04", "M", "en-029", "m4", 38, 155),
    Speaker("spk05", "M", "en-gb-x-rp", "m5", 50, 170),
    Speaker("spk06", "M", "en-us-nyc", "m6", 62, 185),
    Speaker("spk07", "M", "en-gb-x-gbclan", "m7", 41, 160),
    Speaker("spk08", "M", "en-gb-x-gbcwmd", "m8", 53, 175),
    Speaker("spk09", "M", "en-us", "robert", 65, 150),
    Speaker("spk10", "M", "en", "victor", 44, 165),
    Speaker("spk11", "M", "en-gb-scotland", "Lee", 56, 180),
    Speaker("spk12", "M", "en-029", "Andy", 35, 155),
    Speaker("spk13", "M", "en-gb-x-rp", "Denis", 47, 170),
    Speaker("spk14", "M", "en-us-nyc", "Gene", 59, 185),
    Speaker("spk15", "M", "en-gb-x-gbclan", "adam", 38, 160),
    Speaker("spk16", "M", "en-gb-x-gbcwmd", "benjamin", 50, 175),
    Speaker("spk17", "M", "en-us", "david", 62, 150),
    Speaker("spk18", "M", "en", "edward", 41, 165),
    Speaker("spk19", "M", "en-gb-scotland", "Alex", 53, 180),
    Speaker("spk20", "M", "en-029", "antonio", 65, 155),
    Speaker("spk21", "M", "en-gb-x-rp", "boris", 44, 170),
    Speaker("spk22", "M", "en-us-nyc", "gustave", 56, 185),
    Speaker("spk23", "M", "en-gb-x-gbclan", "Hugo", 35, 160),
    Speaker("spk24", "M", "en-gb-x-gbcwmd", "Michael", 47, 175),
    # Test: held-out men at low, middle and high pitch (median F0 88, 103, 121 Hz).
    Speaker("spk25", "M", "en-us", "paul", 50, 165),
    Speaker("spk26", "M", "en", "john", 50, 175),
    Speaker("spk27", "M", "en-gb-x-rp", "rob", 50, 160),
    # Training and cv: 24 women. espeak-ng has only 12 more distinct female variants, so
    # each speaks twice, with another accent and a pitch 15 steps (-p) higher.
    Speaker("spk28", "F", "en-us", "f1", 35, 150),
    Speaker("spk29", "F", "en", "f2", 47, 165),
    Speaker("spk30", "F", "en-gb-scotland", "f4", 44, 180),
    Speaker("spk31", "F", "en-029", "f5", 38, 155),
    Speaker("spk32", "F", "en-gb-x-rp", "linda", 50, 170),
    Speaker("spk33", "F", "en-us-nyc", "anika", 47, 185),
    Speaker("spk34", "F", "en-gb-x-gbclan", "aunty", 41, 160),
    Speaker("spk35", "F", "en-gb-x-gbcwmd", "grandma", 38, 175),
    Speaker("spk36", "F", "en-us", "Alicia", 50, 150),
    Speaker("spk37", "F", "en", "Annie", 44, 165),
    Speaker("spk38", "F", "en-gb-scotland", "belinda", 41, 180),
    Speaker("spk39", "F", "en-029", "shelby", 35, 155),
    Speaker("spk40", "F", "en-gb-x-rp", "f1", 50, 170),
    Speaker("spk41", "F", "en-us-nyc", "f2", 62, 185),
    Speaker("spk42", "F", "en-gb-x-gbclan", "f4", 59, 160),
    Speaker("spk43", "F", "en-gb-x-gbcwmd", "f5", 53, 175),
    Speaker("spk44", "F", "en-us", "linda", 65, 150),
    Speaker("spk45", "F", "en", "anika", 62, 165),
    Speaker("spk46", "F", "en-gb-scotland", "aunty", 56, 180),
    Speaker("spk47", "F", "en-029", "grandma", 53, 155),
    Speaker("spk48", "F", "en-gb-x-rp", "Alicia", 65, 170),
    Speaker("spk49", "F", "en-us-nyc", "Annie", 59, 185),
    Speaker("spk50", "F", "en-gb-x-gbclan", "belinda", 56, 160),
    Speaker("spk51", "F", "en-gb-x-gbcwmd", "shelby", 50, 175),
    # Test: held-out women at low, middle and high pitch (median F0 186, 216, 250 Hz).
    Speaker("spk52", "F", "en-us", "steph", 50, 170),
    Speaker("spk53", "F", "en-gb-scotland", "f3", 50, 160),
    Speaker("spk54", "F", "en", "Andrea", 50, 175),
    # Training and cv only (--voices with flite): 8 men and 8 women from flite's voices. slt is
    # its only woman, so the women are slt at eight pitches and rates.
    Speaker("fl01", "M", "awb", "", 95, 160, "flite"),
    Speaker("fl02", "M", "awb", "", 115, 180, "flite"),
    Speaker("fl03", "M", "awb", "", 135, 150, "flite"),
    Speaker("fl04", "M", "kal", "", 90, 175, "flite"),
    Speaker("fl05", "M", "kal", "", 108, 155, "flite"),
    Speaker("fl06", "M", "kal", "", 125, 185, "flite"),
    Speaker("fl07", "M", "rms", "", 0, 150, "flite"),
    Speaker("fl08", "M", "rms", "", 0, 180, "flite"),
    Speaker("fl09", "F", "slt", "", 165, 150, "flite"),
    Speaker("fl10", "F", "slt", "", 180, 175, "flite"),
    Speaker("fl11", "F", "slt", "", 195, 160, "flite"),
    Speaker("fl12", "F", "slt", "", 210, 185, "flite"),
    Speaker("fl13", "F", "slt", "", 225, 155, "flite"),
    Speaker("fl14", "F", "slt", "", 240, 170, "flite"),
    Speaker("fl15", "F", "slt", "", 255, 180, "flite"),
    Speaker("fl16", "F", "slt", "", 270, 165, "flite"),
    # Training and cv only (--voices with festival): 8 men and 8 women at the voice's own pitch
    # and shifted (slt is left out: flite has it). Median F0 of the unshifted voices: ked 104,
    # pc 113, hy_fi_mv 82, lp 205, czech_dita 222, suo_fi_lj 170, upc_ca_ona 174 Hz.
    Speaker("fe01", "M", "ked_diphone", "", 0, 165, "festival"),
    Speaker("fe02", "M", "ked_diphone", "", -250, 180, "festival"),
    Speaker("fe03", "M", "ked_diphone", "", 250, 150, "festival"),
    Speaker("fe04", "M", "pc_diphone", "", 0, 160, "festival"),
    Speaker("fe05", "M", "pc_diphone", "", 250, 185, "festival"),
    Speaker("fe06", "M", "pc_diphone", "", -200, 170, "festival"),
    Speaker("fe07", "M", "hy_fi_mv_diphone", "", 0, 170, "festival"),
    Speaker("fe08", "M", "hy_fi_mv_diphone", "", 300, 155, "festival"),
    Speaker("fe09", "F", "lp_diphone", "", 0, 165, "festival"),
    Speaker("fe10", "F", "lp_diphone", "", -250, 180, "festival"),
    Speaker("fe11", "F", "czech_dita", "", 0, 170, "festival"),
    Speaker("fe12", "F", "czech_dita", "", -300, 160, "festival"),
    Speaker("fe13", "F", "suo_fi_lj_diphone", "", 0, 175, "festival"),
    Speaker("fe14", "F", "suo_fi_lj_diphone", "", 250, 160, "festival"),
    Speaker("fe15", "F", "upc_ca_ona_hts", "", 0, 170, "festival"),
    Speaker("fe16", "F", "upc_ca_ona_hts", "", 300, 170, "festival"),
]

# wsj0-2mix tests on speakers never seen in training; cv reuses the training speakers with other
# utterances. Three of each gender are held out, at low, middle and high pitch for their gender
# (median F0 of their sentences in the corpus), so that same-gender test pairs differ in pitch
# as much as typical pairs of real speakers do; no training speaker shares their variants. In
# format 2 the three held-out men had the same F0 within 5%, and two of the women within 3%.
TEST_SPEAKER_IDS = ("spk25", "spk26", "spk27", "spk52", "spk53", "spk54")


def speakers_for(split, engines=ENGINES):
    """Speakers of a split whose engine is in `engines`: 'tt' gets the held-out ones, 'tr' and
    'cv' the others."""
    held_out = split == "tt"
    return [s for s in SPEAKERS
            if (s.id in TEST_SPEAKER_IDS) == held_out and s.engine in engines]


_WORDS = {
    "adj": "old young quiet bright heavy narrow small large yellow purple green silver golden "
           "broken careful sudden gentle early distant wooden empty famous simple strange "
           "warm cold busy lucky clever", 
    "noun": "river garden window teacher doctor letter basket kitchen village mountain ticket "
            "engine pencil bottle sister farmer painter bridge station market carpet candle "
            "wallet jacket rabbit lemon guitar ladder blanket camera",
    "plural": "apples boxes stones papers flowers horses chairs boats cookies shoes rivers "
              "coins birds songs lamps trains",
    "name": "Anna Peter Maria John Laura David Emma Thomas Sophie Daniel Clara Oliver Helen "
            "Victor Julia Martin",
    "verb": "carried painted opened watched cleaned found moved lifted repaired followed "
            "borrowed visited packed dropped counted noticed",
    "intr": "stopped waited vanished returned arrived changed trembled rested disappeared "
            "shivered",
    "adv": "slowly quickly quietly again yesterday suddenly carefully happily alone today",
    "prep": "near behind under beside across inside above below",
    "place": "harbour station library forest school hospital museum bakery office theatre "
             "valley island",
    "time": "this morning last night on monday after dinner before noon every evening "
            "in the spring at midnight",
    "conj": "and but because while although so",
    "number": "two three four five six seven eight nine ten twelve twenty",
}
WORDS = {key: value.split() for key, value in _WORDS.items()}
# "time" entries are phrases; keep them whole.
WORDS["time"] = ["this morning", "last night", "on monday", "after dinner", "before noon",
                 "every evening", "in the spring", "at midnight", "on sunday", "last week"]

# Clause shapes; {x} slots draw from WORDS, a trailing digit lets one clause use two of a kind.
CLAUSES = [
    "the {adj} {noun} {verb} the {noun2}",
    "{name} {verb} a {adj} {noun} {prep} the {place}",
    "{time} the {noun} {intr} {adv}",
    "{name} and {name2} {verb} the {noun} {time}",
    "the {noun} {prep} the {place} {intr}",
    "we {verb} {number} {adj} {plural} {adv}",
    "{name} {intr} {prep} the {adj} {place}",
    "the {adj} {plural} {intr} {time}",
    "my {noun} {verb} {number} {plural} {prep} the {noun2}",
    "nobody {verb} the {adj} {noun} {adv}",
]


def _fill(template, rng):
    out = []
    for token in template.split():
        if token.startswith("{") and token.endswith("}"):
            kind = token[1:-1].rstrip("0123456789")
            out.append(rng.choice(WORDS[kind]))
        else:
            out.append(token)
    return " ".join(out)


def make_sentence(rng, min_words):
    """A sentence of one or more clauses joined by conjunctions, at least min_words long."""
    words = _fill(rng.choice(CLAUSES), rng).split()
    while len(words) < min_words:
        words.append(rng.choice(WORDS["conj"]))
        words.extend(_fill(rng.choice(CLAUSES), rng).split())
    return " ".join(words)


def words_for_duration(speaker, seconds):
    """How many words the speaker needs for about `seconds` of speech.

    espeak-ng's -s is in words per minute, but our words are longer than its average, hence
    the 0.8 (measured: the trimmed duration then lands near the target). flite speakers have
    their rate in the same unit.
    """
    return max(3, int(round(seconds * speaker.speed / 60.0 * 0.8)))


def sentence_rng(seed, split, speaker_id, index, attempt):
    """The generator for one source slot: depends only on its identity, not on run order."""
    return random.Random("%d:text:%s:%s:%d:%d" % (seed, split, speaker_id, index, attempt))
