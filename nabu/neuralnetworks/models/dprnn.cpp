// dprnn (Luo, Chen & Yoshioka 2020, docs/models.md): the shared codec (waveform_mask_model.h)
// with dual-path BLSTM blocks over overlapping chunks estimating the masks.
#include "nabu/neuralnetworks/models/recurrent.h"
#include "nabu/neuralnetworks/models/waveform_mask_model.h"

namespace nabu {
namespace {

using namespace waveform;


// One path of a dual-path block: BLSTM, linear back to B channels, norm, residual.
struct DualPathLayer {
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear projection{nullptr};
  FrameNorm norm{nullptr};
};

class DprnnModel : public WaveformMaskModel {
 public:
  DprnnModel(const std::string& name, const std::string& where, DprnnOptions options)
      : WaveformMaskModel(name, "dprnn", where, options), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    const auto device = build_front(inputs);
    const auto& o = options_;
    auto path = [&](const std::string& prefix) {
      DualPathLayer layer;
      layer.lstm = register_module(
          prefix + "lstm",
          torch::nn::LSTM(torch::nn::LSTMOptions(o.bottleneck_channels, o.hidden_units)
                              .batch_first(true)
                              .bidirectional(true)));
      layer.projection =
          register_module(prefix + "projection",
                          torch::nn::Linear(2 * int64_t{o.hidden_units}, o.bottleneck_channels));
      layer.norm =
          register_module(prefix + "norm", FrameNorm(o.norm, o.bottleneck_channels, device));
      return layer;
    };
    for (int b = 0; b < o.num_blocks; ++b) {
      intra_.push_back(path("block" + std::to_string(b) + "_intra_"));
      inter_.push_back(path("block" + std::to_string(b) + "_inter_"));
    }
    output_activation_ = register_module("output_prelu", torch::nn::PReLU());
    speaker_layer_ = register_module(
        "speakers",
        torch::nn::Conv1d(torch::nn::Conv1dOptions(
            o.bottleneck_channels, int64_t{o.num_speakers} * o.bottleneck_channels, 1)));
    gate_tanh_ =
        register_module("gate_tanh", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                         o.bottleneck_channels, o.bottleneck_channels, 1)));
    gate_sigmoid_ =
        register_module("gate_sigmoid", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                            o.bottleneck_channels, o.bottleneck_channels, 1)));
    mask_layer_ = register_module(
        "mask",
        torch::nn::Conv1d(
            torch::nn::Conv1dOptions(o.bottleneck_channels, o.encoder_filters, 1).bias(false)));
    to(device);
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    auto [encoded, features] = encode(inputs, seq_lengths);  // features [B, C, K]
    const int64_t batch = features.size(0), channels = features.size(1);
    const int64_t frames = features.size(2);
    const int64_t chunk = options_.chunk_size, hop = chunk / 2;
    // Chunks of `chunk` frames every `hop` over the frames padded by `hop` on both sides and up
    // to a whole number of hops; position p of the padded sequence is real for utterance b when
    // p < hop + K_b (the front padding is the same zeros alone or in a batch).
    const int64_t chunks = (frames + hop - 1) / hop + 1;
    const int64_t padded = (chunks + 1) * hop;
    auto padded_features = F::pad(features, F::PadFuncOptions({hop, padded - frames - hop}));
    auto extent = encoded.frame_lengths.to(features.device()) + hop;  // [B]
    // x [B, C, chunks, chunk]
    auto x = padded_features.unfold(2, chunk, hop);
    auto position = (torch::arange(chunks, extent.options()) * hop).view({1, -1, 1}) +
                    torch::arange(chunk, extent.options()).view({1, 1, -1});
    auto valid = (position < extent.view({-1, 1, 1})).to(x.scalar_type());  // [B, chunks, chunk]
    auto valid_mask = valid.reshape({batch, 1, chunks * chunk});
    // Frames of each chunk that are real, and real chunks at each position within a chunk.
    auto intra_lengths = valid.sum(2).to(torch::kLong).reshape({-1});  // [B * chunks]
    auto inter_lengths = valid.sum(1).to(torch::kLong).reshape({-1});  // [B * chunk]
    for (std::size_t b = 0; b < intra_.size(); ++b) {
      // Intra-chunk: sequences of `chunk` frames, one per (utterance, chunk).
      auto sequences = x.permute({0, 2, 3, 1}).reshape({batch * chunks, chunk, channels});
      auto out = run_path(intra_[b], sequences, intra_lengths, training)
                     .reshape({batch, chunks, chunk, channels})
                     .permute({0, 3, 1, 2});
      x = x + normalised(intra_[b], out, valid_mask);
      // Inter-chunk: sequences of `chunks` steps, one per (utterance, position in the chunk).
      sequences = x.permute({0, 3, 2, 1}).reshape({batch * chunk, chunks, channels});
      out = run_path(inter_[b], sequences, inter_lengths, training)
                .reshape({batch, chunk, chunks, channels})
                .permute({0, 3, 2, 1});
      x = x + normalised(inter_[b], out, valid_mask);
    }
    // Speakers, then overlap-add of the chunks back to frames.
    auto flat = output_activation_->forward(x.reshape({batch, channels, chunks * chunk}));
    // fold wants [B*S, C*chunk, chunks], the position in the chunk innermost per channel.
    auto per_speaker = speaker_layer_->forward(flat)
                           .reshape({batch * options_.num_speakers, channels, chunks, chunk})
                           .permute({0, 1, 3, 2})
                           .reshape({batch * options_.num_speakers, channels * chunk, chunks});
    auto summed = F::fold(per_speaker, F::FoldFuncOptions({1, padded}, {1, chunk}).stride({1, hop}))
                      .reshape({batch * options_.num_speakers, channels, padded})
                      .narrow(2, hop, frames);
    auto gated =
        torch::tanh(gate_tanh_->forward(summed)) * torch::sigmoid(gate_sigmoid_->forward(summed));
    auto logits = mask_layer_->forward(gated).reshape(
        {batch, options_.num_speakers, options_.encoder_filters, frames});
    return decode(logits, encoded);
  }

 public:
  const DprnnOptions& options() const { return options_; }

 private:
  // [sequences, steps, C] -> [sequences, steps, C]: BLSTM to each sequence's length, linear.
  torch::Tensor run_path(DualPathLayer& layer, const torch::Tensor& sequences,
                         const torch::Tensor& lengths, bool training) {
    auto hidden = recurrent::bidirectional_lstm(*layer.lstm, sequences, lengths, training);
    return layer.projection->forward(hidden);
  }

  // out [B, C, chunks, chunk] normalised over the valid positions, zero elsewhere.
  torch::Tensor normalised(DualPathLayer& layer, const torch::Tensor& out,
                           const torch::Tensor& valid_mask) {
    const auto sizes = out.sizes().vec();
    auto flat = out.reshape({sizes[0], sizes[1], sizes[2] * sizes[3]});
    return layer.norm->forward(flat * valid_mask, valid_mask).reshape(sizes);
  }

  DprnnOptions options_;
  torch::nn::Conv1d speaker_layer_{nullptr}, gate_tanh_{nullptr}, gate_sigmoid_{nullptr},
      mask_layer_{nullptr};
  std::vector<DualPathLayer> intra_, inter_;
  torch::nn::PReLU output_activation_{nullptr};
};

}  // namespace

const DprnnOptions* dprnn_options(const Model& model) {
  const auto* dprnn = dynamic_cast<const DprnnModel*>(&model);
  return dprnn ? &dprnn->options() : nullptr;
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "dprnn", (make_model<DprnnModel, DprnnOptions>),
                           DprnnOptions,
                           "dual-path RNN: learned encoder, intra- and inter-chunk BLSTMs over "
                           "overlapping chunks, decoder; waveform [B,N,1] -> [B,N,S]")

}  // namespace nabu
