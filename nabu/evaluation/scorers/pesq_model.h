// PESQ's perceptual model (ITU-T P.862 section 10.2.3 onwards), shared by pesq.cpp: the Bark
// bands of a rate and the raw MOS of two levelled, filtered, aligned signals.
#pragma once

#include <vector>

#include "nabu/evaluation/scorers/pesq_alignment.h"

namespace nabu::pesq_detail {

// The raw P.862 score (4.5 - 0.1 d - 0.0309 a) of `degraded` against `reference`, both
// padded to the same length, with the utterances' delays.
double raw_mos(const PaddedSignal& reference, const PaddedSignal& degraded,
               const std::vector<Utterance>& utterances, const RateConstants& constants);

}  // namespace nabu::pesq_detail
