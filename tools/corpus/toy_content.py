"""What the toy corpus says and who says it: the synthetic speakers and a sentence generator.

Used by tools/make_toy_corpus. Only the standard library, so the text side can be tested alone.
"""

import random
from collections import namedtuple

# One synthetic speaker = an espeak-ng language voice (accent) + a voice variant (formants, pitch
# range, gender) + the -p pitch and -s speed (words per minute) options. Every variant is used
# once, so no two speakers share formant settings.
Speaker = namedtuple("Speaker", "id gender voice variant pitch speed")

SPEAKERS = [
    Speaker("spk01", "M", "en-us", "m1", 45, 165),
    Speaker("spk02", "M", "en", "m2", 50, 175),
    Speaker("spk03", "M", "en-gb-scotland", "m3", 40, 155),
    Speaker("spk04", "M", "en-029", "m4", 55, 170),
    Speaker("spk05", "M", "en-gb-x-rp", "m6", 35, 160),
    Speaker("spk06", "M", "en-us-nyc", "m7", 50, 185),
    Speaker("spk07", "M", "en", "m8", 60, 150),
    Speaker("spk08", "M", "en-us", "paul", 45, 170),
    Speaker("spk09", "M", "en-gb-x-gbclan", "robert", 55, 160),
    Speaker("spk10", "M", "en-us", "john", 38, 180),
    Speaker("spk11", "M", "en-gb-x-gbcwmd", "victor", 48, 165),
    Speaker("spk12", "M", "en", "Lee", 42, 175),
    Speaker("spk13", "F", "en-us", "f1", 50, 170),
    Speaker("spk14", "F", "en", "f2", 55, 160),
    Speaker("spk15", "F", "en-gb-scotland", "f3", 45, 175),
    Speaker("spk16", "F", "en-029", "f4", 60, 165),
    Speaker("spk17", "F", "en-gb-x-rp", "f5", 50, 155),
    Speaker("spk18", "F", "en-us-nyc", "linda", 40, 170),
    Speaker("spk19", "F", "en", "anika", 45, 160),
    Speaker("spk20", "F", "en-us", "aunty", 55, 180),
    Speaker("spk21", "F", "en-gb-x-gbclan", "grandma", 50, 150),
    Speaker("spk22", "F", "en-us", "steph", 48, 165),
    Speaker("spk23", "F", "en-gb-x-gbcwmd", "Alicia", 42, 170),
    Speaker("spk24", "F", "en", "Andrea", 52, 160),
    # More training speakers (wsj0-2mix trains on 101): with 18 the separation of unseen
    # same-gender voices did not generalise.
    Speaker("spk25", "M", "en-us", "Adam", 44, 172),
    Speaker("spk26", "M", "en-gb-x-rp", "Andy", 52, 158),
    Speaker("spk27", "M", "en", "Benjamin", 38, 168),
    Speaker("spk28", "M", "en-us-nyc", "Caleb", 56, 176),
    Speaker("spk29", "M", "en-gb-scotland", "David", 47, 162),
    Speaker("spk30", "M", "en-029", "Denis", 41, 182),
    Speaker("spk31", "M", "en-gb-x-gbclan", "Edward", 58, 154),
    Speaker("spk32", "M", "en-gb-x-gbcwmd", "Gene", 36, 170),
    Speaker("spk33", "F", "en-us", "Annie", 47, 166),
    Speaker("spk34", "F", "en-gb-x-rp", "Belinda", 58, 172),
    Speaker("spk35", "F", "en", "female2", 44, 158),
    Speaker("spk36", "F", "en-us-nyc", "female3", 53, 178),
    Speaker("spk37", "F", "en-gb-scotland", "female4", 49, 162),
    Speaker("spk38", "F", "en-029", "female5", 57, 168),
    Speaker("spk39", "F", "en-gb-x-gbclan", "Steph2", 41, 174),
    Speaker("spk40", "F", "en-gb-x-gbcwmd", "Steph3", 54, 156),
]

# wsj0-2mix tests on speakers never seen in training; cv reuses the training speakers with other
# utterances. Three of each gender are held out so the test set has all gender combinations.
TEST_SPEAKER_IDS = ("spk10", "spk11", "spk12", "spk22", "spk23", "spk24")


def speakers_for(split):
    """Speakers of a split: 'tt' gets the held-out ones, 'tr' and 'cv' the others."""
    held_out = split == "tt"
    return [s for s in SPEAKERS if (s.id in TEST_SPEAKER_IDS) == held_out]


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
    the 0.8 (measured: the trimmed duration then lands near the target).
    """
    return max(3, int(round(seconds * speaker.speed / 60.0 * 0.8)))


def sentence_rng(seed, split, speaker_id, index, attempt):
    """The generator for one source slot: depends only on its identity, not on run order."""
    return random.Random("%d:text:%s:%s:%d:%d" % (seed, split, speaker_id, index, attempt))
