// attractor: the speakers' attractors of a deep attractor network as a model, so other models can
// take them as input (the DANet-Drude2018 recipes identify speakers from them; docs/models.md).
// It has no parameters: an attractor is the mean embedding of the used bins a speaker owns,
// computed exactly as the deepattractornet loss computes its oracle attractors.
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/speaker_vectors.h"
#include "nabu/neuralnetworks/models/model.h"

namespace nabu {
namespace {

struct AttractorOptions {
  std::string architecture;
  bool trainable = true;
  bool normalization = false;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("normalization", normalization,
      "True scales every attractor to unit L2 norm (epsilon 1e-12, as tf.nn.l2_normalize)");
  }
};

class AttractorModel : public Model {
 public:
  AttractorModel(const std::string& name, const std::string& where, AttractorOptions options)
      : Model(name, "attractor", options.trainable, where), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>&) override {}

  // Three inputs: embeddings [B, T, F*D], the speakers' bins [B, T, F*S] (deep clustering
  // targets, s fastest), used bins [B, T, F] -> [B, S, D]. Two inputs: embeddings per speaker
  // [B, S, T, F*D] and used bins [B, T, F]; every used bin counts for every speaker.
  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool) override {
    expect_inputs(inputs, 2, 3);
    const auto& data = inputs[0];
    const auto& usedbins = inputs.back();
    expect_rank(usedbins, 3, "the used bins (last input, [B, T, F])");
    const int64_t batch = usedbins.size(0), frames = usedbins.size(1),
                  features = usedbins.size(2);
    torch::Tensor attractors;
    if (inputs.size() == 3) {
      const auto& owners = inputs[1];
      expect_rank(data, 3, "the embeddings (input 0, [B, T, F*D])");
      expect_rank(owners, 3, "the speakers' bins (input 1, [B, T, F*S])");
      check_frames(data, owners, "input 1");
      check_frames(data, usedbins, "input 2");
      const int64_t dims = per_bin(data.size(2), features, "input 0");
      const int64_t speakers = per_bin(owners.size(2), features, "input 1");
      auto weights = losses::as_dtype_of(usedbins, data);
      if (seq_lengths.defined()) weights = weights * losses::real_frames(seq_lengths, frames, data).unsqueeze(2);
      weights = weights.reshape({batch, frames * features, 1});
      auto vectors = data.reshape({batch, frames * features, dims}) * weights;
      auto labels =
          losses::as_dtype_of(owners, data).reshape({batch, frames * features, speakers}) * weights;
      attractors = mean_vector_per_speaker(vectors, labels);
    } else {
      expect_rank(data, 4, "the embeddings per speaker (input 0, [B, S, T, F*D])");
      if (data.size(0) != batch || data.size(2) != frames)
        throw Error(describe() + ": the embeddings per speaker " + shape_of(data) +
                    " and the used bins " + shape_of(usedbins) + " disagree on B or T");
      const int64_t speakers = data.size(1);
      const int64_t dims = per_bin(data.size(3), features, "input 0");
      auto weights = losses::as_dtype_of(usedbins, data).reshape({batch, 1, frames * features, 1});
      auto sums = (data.reshape({batch, speakers, frames * features, dims}) * weights).sum(2);
      auto counts = weights.sum({2, 3}).clamp_min(1.0);  // [B, 1]
      attractors = sums / counts.unsqueeze(-1);
    }
    if (options_.normalization) attractors = l2_normalize_last(attractors, 1e-12);
    return attractors;
  }

 private:
  static std::string shape_of(const torch::Tensor& tensor) {
    std::ostringstream text;
    text << tensor.sizes();
    return text.str();
  }
  void check_frames(const torch::Tensor& data, const torch::Tensor& other,
                    const std::string& what) const {
    if (other.size(0) != data.size(0) || other.size(1) != data.size(1))
      throw Error(describe() + ": " + what + " " + shape_of(other) +
                  " and the embeddings " + shape_of(data) + " disagree on B or T");
  }
  // The size per time-frequency bin of a last axis of F*K values.
  int64_t per_bin(int64_t size, int64_t features, const std::string& what) const {
    if (features == 0 || size % features != 0)
      throw Error(describe() + ": the last axis of " + what + " (" + std::to_string(size) +
                  ") is not a multiple of F = " + std::to_string(features) +
                  " of the used bins");
    return size / features;
  }

  AttractorOptions options_;
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(model_registry, "attractor",
                           (make_model<AttractorModel, AttractorOptions>), AttractorOptions,
                           "mean embedding of the used bins each speaker owns, [B, S, D] (no "
                           "parameters; DANet speaker identification)")

}  // namespace nabu
