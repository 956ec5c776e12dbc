// stackedmasks (PIT models): the model estimates one mask per speaker directly
// (docs/postprocessing.md).
#include "nabu/core/error.h"
#include "nabu/core/onnx.h"
#include "nabu/inference/reconstructors/reconstructor.h"

namespace nabu {

namespace {

struct StackedmasksReconstructorOptions : ReconstructorOptions {
  std::string activation;         // wins over output_activation when both are given
  std::string output_activation;  // softmax (default), sigmoid, None
  std::string usedbins;           // only read by the original's (unused) frame permutation
  void declare(OptionsReader& r);
  std::string effective_activation() const;
};

void StackedmasksReconstructorOptions::declare(OptionsReader& r) {
  ReconstructorOptions::declare(r);
  const std::vector<std::string> allowed{"softmax", "sigmoid", "None", "none"};
  r.choice("activation", activation, allowed, "mask activation (softmax is over the speakers)");
  r.choice("output_activation", output_activation, allowed,
           "same as activation (used when activation is absent)");
  r("usedbins", usedbins,
    "used-bins section; the original only reads it for its optimal frame permutation (unused)");
}

std::string StackedmasksReconstructorOptions::effective_activation() const {
  if (!activation.empty()) return activation;
  if (!output_activation.empty()) return output_activation;
  return "softmax";
}


class StackedmasksReconstructor : public Reconstructor {
 public:
  explicit StackedmasksReconstructor(const ConfigSection& section)
      : StackedmasksReconstructor(section, read_options<StackedmasksReconstructorOptions>(
                                               section, "reconstruct_type stackedmasks")) {}

  torch::Tensor masks(const TensorMap& outputs, const torch::Tensor& /*usedbins*/) override {
    const auto& estimates = output(outputs, "bin_est");
    torch::Tensor masks;  // [S, T, F]
    if (estimates.dim() == 2 && estimates.size(1) % num_speakers_ == 0) {
      // Column s*F + f holds speaker s, bin f: the original's Fortran-order reshape, the same
      // layout as the PIT loss.
      int64_t bins = estimates.size(1) / num_speakers_;
      masks = estimates.reshape({estimates.size(0), num_speakers_, bins}).permute({1, 0, 2});
    } else if (estimates.dim() == 3 && estimates.size(2) == num_speakers_) {
      masks = estimates.permute({2, 0, 1});
    } else {
      throw Error(where_ + ": bin_est must be [T, F*" + std::to_string(num_speakers_) +
                  "] or [T, F, " + std::to_string(num_speakers_) + "], got " +
                  std::to_string(estimates.dim()) + "-D with last size " +
                  std::to_string(estimates.dim() ? estimates.size(-1) : 0));
    }
    masks = masks.to(torch::kFloat32);
    if (activation_ == "softmax") return masks.softmax(0).contiguous();
    if (activation_ == "sigmoid") return masks.sigmoid().contiguous();
    return masks.contiguous();
  }

  std::string torchscript_masks() const override {
    const std::string speakers = std::to_string(num_speakers());
    std::string script =
        "    if estimates.dim() == 3:\n"
        "        masks = estimates.reshape([estimates.size(0), estimates.size(1), " + speakers +
        ", -1]).permute([0, 2, 1, 3]).float()\n"
        "    else:\n"
        "        masks = estimates.permute([0, 3, 1, 2]).float()\n";
    if (activation_ == "softmax") script += "    masks = masks.softmax(1)\n";
    if (activation_ == "sigmoid") script += "    masks = masks.sigmoid()\n";
    return script;
  }

  std::string onnx_masks(onnx::Graph& graph, const std::string& estimates,
                         int64_t rank) const override {
    std::string masks =
        rank == 3 ? graph.node("Transpose",
                               {graph.node("Reshape", {estimates, graph.ints({0, 0, num_speakers(), -1})})},
                               {onnx::ints_attribute("perm", {0, 2, 1, 3})})
                  : graph.node("Transpose", {estimates}, {onnx::ints_attribute("perm", {0, 3, 1, 2})});
    if (activation_ == "softmax") return graph.node("Softmax", {masks}, {onnx::int_attribute("axis", 1)});
    if (activation_ == "sigmoid") return graph.node("Sigmoid", {masks});
    return masks;
  }

 private:
  StackedmasksReconstructor(const ConfigSection& section,
                            const StackedmasksReconstructorOptions& options)
      : Reconstructor(section, options, {"bin_est"}), activation_(options.effective_activation()) {
    usedbins_ = options.usedbins;
    uses_usedbins_ = false;
    if (activation_ == "none") activation_ = "None";
  }

  std::string activation_;
};

ReconstructorPtr make_stackedmasks(const ConfigSection& section) {
  return std::make_shared<StackedmasksReconstructor>(section);
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(reconstructor_registry, "stackedmasks", make_stackedmasks,
                           StackedmasksReconstructorOptions,
                           "one mask per speaker from the model (PIT), softmax/sigmoid/None")

}  // namespace nabu
