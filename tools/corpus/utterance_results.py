"""The per-mixture results of nabu test, results_<task>_<score>_utterances.csv, as the tools
that analyse them read them (tools/compare_tests, tools/pitch_breakdown)."""

import csv
import math

from toy_audio import CorpusError


def read_utterance_results(path, columns=("utterance",)):
    """[(row, improvement)] of one results file: each row as a dict of its columns (`columns`
    must be among them), and the value of its *_improvement column, NaN where the scorer could
    not score the mixture (an empty field; nabu test lists those first)."""
    try:
        with open(path) as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            found = reader.fieldnames or []
    except OSError as error:
        raise CorpusError("%s: cannot read (%s); run nabu test first" % (path, error.strerror))
    improvement = [c for c in found if c.endswith("_improvement")]
    if any(c not in found for c in columns) or not improvement:
        raise CorpusError("%s: expected the columns %s and *_improvement"
                          % (path, ", ".join(columns)))
    results = []
    for number, row in enumerate(rows, 2):
        field = row[improvement[0]]
        try:
            value = float(field) if field else math.nan
        except ValueError:
            raise CorpusError("%s:%d: '%s' is not a number" % (path, number, field))
        results.append((row, value))
    return results
