"""The wsj0-2mix list files of one set (mix_wav.scp, allS_wav.scp, utt_spkinfo.txt): writing
them atomically and reading them back with cross-checks. Standard library only."""

import os

from toy_audio import CorpusError


def write_text(path, text):
    """Temp file + rename, so a reader never sees half a list."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_lists(directory, entries):
    """entries: [(name, mix path, [source paths], [(speaker id, gender)])], in corpus order."""
    mix_lines, alls_lines, info_lines = [], [], []
    for name, mix, sources, speakers in entries:
        mix_lines.append("%s %s\n" % (name, mix))
        alls_lines.append("%s %s\n" % (name, " ".join(sources)))
        # scorer.py: field 1 is skipped, then "id gender" pairs with gender M or F.
        pairs = " ".join("%s %s" % speaker for speaker in speakers)
        info_lines.append("%s %s %s\n" % (name, mix, pairs))
    for filename, lines in (("mix_wav.scp", mix_lines), ("allS_wav.scp", alls_lines),
                            ("utt_spkinfo.txt", info_lines)):
        write_text(os.path.join(directory, filename), "".join(lines))


def read_lists(directory):
    """Reads and cross-checks the three list files of a set: [(name, mix, [sources])]."""
    def lines(filename):
        path = os.path.join(directory, filename)
        try:
            with open(path) as f:
                return [line.rstrip("\n").split(" ") for line in f if line.strip()]
        except OSError as error:
            raise CorpusError("cannot read %s: %s" % (path, error))

    mixes, alls, infos = lines("mix_wav.scp"), lines("allS_wav.scp"), lines("utt_spkinfo.txt")
    if not (len(mixes) == len(alls) == len(infos)):
        raise CorpusError("%s: list files have different numbers of lines" % directory)
    entries = []
    for mix, src, info in zip(mixes, alls, infos):
        where = "%s, utterance %s" % (directory, mix[0])
        if len(mix) != 2 or src[0] != mix[0] or info[0] != mix[0]:
            raise CorpusError("%s: list files disagree" % where)
        if len(src) < 3 or len(info) != 2 + 2 * (len(src) - 1) or info[1] != mix[1]:
            raise CorpusError("%s: malformed allS_wav.scp or utt_spkinfo.txt line" % where)
        if any(g not in ("M", "F") for g in info[3::2]):
            raise CorpusError("%s: gender must be M or F" % where)
        entries.append((mix[0], mix[1], src[1:]))
    return entries
