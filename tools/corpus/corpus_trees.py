#!/usr/bin/python3
"""Miniature LibriMix, WHAM! and wsj0-2mix trees made from the generated corpus, in each corpus's
exact layout: folder names, mixture names (LibriSpeech utterances joined by '_' for LibriMix;
wsj0 utterances and gains for WHAM! and wsj0-2mix), 16-bit PCM wavs, and LibriMix's metadata
CSVs with its columns. The recipe regression tests run `nabu prepare` on them
(tests/recipes/run_regression), so a recipe for a corpus nobody can ship in CI is still run end
to end.

Made from the babble version of the corpus (tools/make_noisy_corpus), whose mixtures are
s1 + s2 + noise: mix_both is that mixture, mix_clean is s1 + s2 and mix_single is s1 + noise,
all as long as their sources, as in LibriMix's and WHAM!'s "min" mode.
"""

import argparse
import os
import shutil
import sys

import numpy as np

import toy_audio
import toy_lists

SPLITS = {"librimix": {"tr": "train-360", "cv": "dev", "tt": "test"},
          "wham": {"tr": "tr", "cv": "cv", "tt": "tt"}}


def _clip16(x):
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def _read_set(corpus, split, folder):
    directory = os.path.join(corpus, folder, "wav8k", "min", split)
    entries = toy_lists.read_lists(directory)
    noise = {}
    noise_list = os.path.join(directory, "noise_wav.scp")
    if os.path.exists(noise_list):
        with open(noise_list) as handle:
            for line in handle:
                name, path = line.split()
                noise[name] = path
    return entries, noise


def _noisy_tree_signals(mix_path, source_paths, noise_path):
    """The folders of a LibriMix or WHAM! mixture from one babble-corpus mixture (s1 + s2 +
    noise): {folder: int16 samples}, and the rate."""
    s1, rate = toy_audio.read_wav(source_paths[0])
    s2, _ = toy_audio.read_wav(source_paths[1])
    both, _ = toy_audio.read_wav(mix_path)
    background, _ = toy_audio.read_wav(noise_path)
    return {"s1": s1, "s2": s2, "noise": background, "mix_both": both,
            "mix_clean": _clip16(s1.astype(np.int32) + s2),
            "mix_single": _clip16(s1.astype(np.int32) + background)}, rate


def _speaker_codes(corpus):
    """Three-character wsj0-style codes for the corpus's speakers ('fe04' and 'fe09' would both
    be 'fe0' in wsj0's naming)."""
    speakers = set()
    for split in ("tr", "cv", "tt"):
        for name, _, _ in toy_lists.read_lists(os.path.join(corpus, "2speakers", "wav8k", "min",
                                                            split)):
            speakers.update(name.split("_")[2:])
    return {speaker: "%03d" % index for index, speaker in enumerate(sorted(speakers))}


def _speakers(name):
    return name.split("_")[2:]


def _number(name):
    return int(name.split("_")[1])


def make_librimix(corpus, root, per_split=None):
    """<root>/Libri2Mix/wav8k/min/{train-360,dev,test}/{mix_clean,mix_both,mix_single,s1,s2,noise}
    and metadata/mixture_<split>_<type>.csv. Returns the Libri2Mix folder."""
    base = os.path.join(root, "Libri2Mix", "wav8k", "min")
    metadata = os.path.join(base, "metadata")
    os.makedirs(metadata, exist_ok=True)
    for split, librimix_split in SPLITS["librimix"].items():
        entries, noise = _read_set(corpus, split, "2speakers_babble")
        rows = {kind: [] for kind in ("mix_clean", "mix_both", "mix_single")}
        for name, mix_path, source_paths in entries[:per_split]:
            n = _number(name)
            s1_speaker, s2_speaker = _speakers(name)
            mixture_id = "%s-%d-%04d_%s-%d-%04d" % (s1_speaker, 10 + n % 7, n, s2_speaker,
                                                     20 + n % 5, n)
            signals, rate = _noisy_tree_signals(mix_path, source_paths, noise[name])
            paths = {}
            for folder, samples in signals.items():
                directory = os.path.join(base, librimix_split, folder)
                os.makedirs(directory, exist_ok=True)
                paths[folder] = os.path.join(directory, mixture_id + ".wav")
                toy_audio.write_wav(paths[folder], samples, rate)
            length = len(signals["mix_both"])
            rows["mix_clean"].append([mixture_id, paths["mix_clean"], paths["s1"], paths["s2"],
                                      length])
            rows["mix_both"].append([mixture_id, paths["mix_both"], paths["s1"], paths["s2"],
                                     paths["noise"], length])
            rows["mix_single"].append([mixture_id, paths["mix_single"], paths["s1"],
                                       paths["noise"], length])
        headers = {"mix_clean": "mixture_ID,mixture_path,source_1_path,source_2_path,length",
                   "mix_both": "mixture_ID,mixture_path,source_1_path,source_2_path,noise_path,"
                               "length",
                   "mix_single": "mixture_ID,mixture_path,source_1_path,noise_path,length"}
        for kind, kind_rows in rows.items():
            text = headers[kind] + "\n" + "".join(
                ",".join(str(field) for field in row) + "\n" for row in kind_rows)
            toy_lists.write_text(os.path.join(metadata, "mixture_%s_%s.csv"
                                              % (librimix_split, kind)), text)
    return os.path.join(root, "Libri2Mix")


def _wsj0_name(name, codes):
    """wsj0-2mix's naming: <utterance>_<gain>_<utterance>_<-gain>, utterances of 8 characters
    whose first three are the speaker."""
    n = _number(name)
    s1_speaker, s2_speaker = _speakers(name)
    gain = 0.1 + (n % 23) / 10.0
    return "%sc%04x_%.4f_%so%04x_%.4f" % (codes[s1_speaker], n, gain, codes[s2_speaker], n, -gain)


def make_wham(corpus, root, per_split=None):
    """<root>/wham/wav8k/min/{tr,cv,tt}/{mix_clean,mix_both,mix_single,s1,s2,noise}, as WHAM!'s
    scripts write it. Returns the wham folder."""
    codes = _speaker_codes(corpus)
    base = os.path.join(root, "wham", "wav8k", "min")
    for split in ("tr", "cv", "tt"):
        entries, noise = _read_set(corpus, split, "2speakers_babble")
        for name, mix_path, source_paths in entries[:per_split]:
            signals, rate = _noisy_tree_signals(mix_path, source_paths, noise[name])
            for folder, samples in signals.items():
                directory = os.path.join(base, split, folder)
                os.makedirs(directory, exist_ok=True)
                toy_audio.write_wav(os.path.join(directory, _wsj0_name(name, codes) + ".wav"),
                                    samples, rate)
    return os.path.join(root, "wham")


def make_wsj0_mix(corpus, root, per_split=None):
    """<root>/wsj0-mix/2speakers/wav8k/min/{tr,cv,tt}/{mix,s1,s2} from the clean corpus.
    Returns the wsj0-mix folder."""
    codes = _speaker_codes(corpus)
    base = os.path.join(root, "wsj0-mix", "2speakers", "wav8k", "min")
    for split in ("tr", "cv", "tt"):
        entries, _ = _read_set(corpus, split, "2speakers")
        for name, mix_path, source_paths in entries[:per_split]:
            for folder, path in (("mix", mix_path), ("s1", source_paths[0]),
                                 ("s2", source_paths[1])):
                samples, rate = toy_audio.read_wav(path)
                directory = os.path.join(base, split, folder)
                os.makedirs(directory, exist_ok=True)
                toy_audio.write_wav(os.path.join(directory, _wsj0_name(name, codes) + ".wav"),
                                    samples, rate)
    return os.path.join(root, "wsj0-mix")


def make_all(corpus, root):
    """All three trees under <root>; <root>/.complete marks them done."""
    make_librimix(corpus, root)
    make_wham(corpus, root)
    make_wsj0_mix(corpus, root)
    toy_lists.write_text(os.path.join(root, ".complete"), "librimix wham wsj0-mix\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="the generated corpus (with its babble "
                        "version, tools/make_noisy_corpus)")
    parser.add_argument("--root", required=True, help="where the trees go (replaced)")
    args = parser.parse_args()
    shutil.rmtree(args.root, ignore_errors=True)
    make_all(args.corpus, args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
