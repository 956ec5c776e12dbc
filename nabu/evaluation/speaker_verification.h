// Speaker-verification test tasks (output_handling_type = speaker_verification; the original's
// DANet-Drude2018 task_sr* tasks, docs/postprocessing.md "Speaker verification"): a handler
// (speaker_verification_handler.cfg) turns a test mixture's model outputs into one vector per
// speaker, in reference order; each scorer (speaker_verification_scorer.cfg, named by the task's
// scorers_names) draws trials, for every speaker of every mixture the vectors of the same speaker
// in other mixtures (targets) and of other speakers (non-targets), scores them by cosine
// similarity, and reports the equal error rate and the minimum detection cost.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nabu/core/options.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/evaluators/evaluator.h"

namespace nabu {

class TrainedExperiment;

inline constexpr char kSpeakerVerificationHandlerFile[] = "speaker_verification_handler.cfg";
inline constexpr char kSpeakerVerificationScorerFile[] = "speaker_verification_scorer.cfg";

struct SpeakerVerificationHandlerOptions {
  std::string type;  // attractor_from_embeddings or ivector_extractor
  std::vector<std::string> output_names;
  bool normalization = true;
  int nrs = 2, emb_dim = 0;
  std::string usedbins, task_for_masks, score_type_for_perm = "sdr";
  double thr_for_mask = -1;  // < 0: the masks as they are
  bool binary_masks = false, rescale_masks = false;
  void declare(OptionsReader& r);
};

struct SpeakerVerificationScorerOptions {
  std::string score_type = "eer_from_ivec";
  std::string spkinfo, load_trial_list = "None", mvn_score_per_mix_spk = "False";
  std::string gender_specific_trials = "all";
  int nrs = 2, num_trials_per_mix_per_spk = 5;
  bool store_trial_list = true, only_competing_spk = false, make_figure = false;
  double p_target = 0.01, c_miss = 1.0, c_fa = 1.0;
  void declare(OptionsReader& r);
  // Whether the trials are read from load_trial_list rather than drawn.
  bool loads_trials() const { return !load_trial_list.empty() && load_trial_list != "None"; }
};

// The operating points of trial scores, one per distinct score from the highest: accepting every
// trial with score >= threshold gives these false-alarm and miss rates. Throws DataError unless
// there are target and non-target trials.
struct OperatingPoint {
  double threshold = 0, false_alarm = 0, miss = 0;
};
std::vector<OperatingPoint> operating_points(const std::vector<double>& scores,
                                             const std::vector<bool>& is_target);

// The equal error rate and the minimum normalised detection cost of trial scores (accept when
// score >= threshold). The EER is where the miss and false-alarm rates cross, interpolated
// linearly between the two operating points around the crossing.
struct VerificationMetrics {
  double eer = 0, eer_threshold = 0, min_dcf = 0, min_dcf_threshold = 0;
  int64_t targets = 0, nontargets = 0;
};
VerificationMetrics verification_metrics(const std::vector<double>& scores,
                                         const std::vector<bool>& is_target, double p_target,
                                         double c_miss, double c_fa);

// One trial list per (mixture, speaker index): the (mixture, speaker index) of each enrolment
// vector and whether it is the same speaker. The original's trials_<scorer>.json holds the same.
struct Trials {
  std::map<std::string, std::vector<std::vector<std::pair<std::string, int>>>> enrolments;
  std::map<std::string, std::vector<std::vector<bool>>> targets;
};
// Speakers of each mixture: (id, gender) in reference order (utt_spkinfo.txt).
using MixtureSpeakers = std::map<std::string, std::vector<std::pair<std::string, std::string>>>;
// Draws the trials as the original (equal_error_rate_from_ivecs.py) does, from a seeded
// generator: up to `per_speaker` target enrolments of the speaker in other mixtures and as many
// non-target enrolments, from mixtures that share no speaker with it (or, with only_competing,
// the other speakers of the mixture wherever they occur); gender_specific_trials restricts
// them (only_m, only_f, same_gen, diff_gen). Candidates are drawn without replacement.
Trials draw_trials(const MixtureSpeakers& speakers, int per_speaker, bool only_competing,
                   const std::string& gender_specific_trials, uint64_t seed);

// Per separated task that a speaker-verification task reads its masks from (task_for_masks):
// each utterance's masks [S, T, F] and, per scorer type, the permutation (estimate perm[j] for
// reference j) of the scored estimates.
struct SeparatedTaskRecord {
  std::map<std::string, torch::Tensor> masks;
  std::map<std::string, std::map<std::string, std::vector<int64_t>>> permutations;
};

bool is_speaker_verification_task(const ConfigSection& task);
// The handler section of a test task, and a scorer section `name` of it; ConfigError naming the
// file and section when either is missing.
SpeakerVerificationHandlerOptions speaker_verification_handler_options(const Recipe& recipe,
                                                                       const std::string& task);
SpeakerVerificationScorerOptions speaker_verification_scorer_options(const Recipe& recipe,
                                                                     const std::string& name,
                                                                     const ConfigSection& task);
// The speaker_verification_scorer.cfg sections that score a task: its scorers_names, or its name.
std::vector<std::string> speaker_verification_scorer_names(const ConfigSection& task);
// The separated tasks whose masks the speaker-verification tasks among `tasks` read.
std::vector<std::string> tasks_read_for_masks(const Recipe& recipe,
                                              const std::vector<std::string>& tasks);
// Every problem of a speaker-verification test task (`nabu check`): its handler and scorer
// sections and their keys, a task_for_masks that is tested before it, a trial list that is not
// there. Each names file:line and key. (That the database sections they name exist is the
// caller's check, as for reconstructor.cfg and scorer.cfg.)
std::vector<std::string> check_speaker_verification_task(const Recipe& recipe,
                                                         const std::string& task,
                                                         const std::vector<std::string>& tasks);

// Runs one speaker-verification task into `testdir`: speaker_verification/<task>/vectors.json,
// results_<scorer>_<score_type>_{summary,complete}.json and trials_<scorer>.json. Returns the
// task's test loss.
EvaluationResult run_speaker_verification_test(
    const Recipe& recipe, TrainedExperiment& model, const std::string& task,
    const std::filesystem::path& testdir, int64_t max_utterances, uint64_t seed,
    const std::map<std::string, SeparatedTaskRecord>& separated,
    const std::function<void(const std::string&)>& on_summary);

}  // namespace nabu
