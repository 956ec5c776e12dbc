// What an input pipeline reads from: a fixed number of examples per epoch, their lengths (for
// bucketing) and a loader of padded batches. The examples of the stores are the same every epoch
// (ExampleSet); dynamic mixing makes new ones every epoch (DynamicMixtureSet), so lengths and
// contents take the epoch.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "nabu/pipeline/batch.h"

namespace nabu {

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  // Examples per epoch.
  virtual int64_t size() const = 0;
  virtual const std::vector<std::string>& data_names() const = 0;
  // Length (frames) of the first input of every example of `epoch`: what bucketing sorts on.
  virtual std::vector<int64_t> lengths(int64_t epoch) const = 0;
  // True when lengths() and load() do not depend on the epoch.
  virtual bool same_every_epoch() const = 0;
  // Reads and pads the examples `indices` of `epoch`; errors name the example.
  virtual Batch load(int64_t epoch, const std::vector<int64_t>& indices) const = 0;
};

// One example's tensor per data name, [length, ...] each.
using ExampleTensors = std::vector<torch::Tensor>;

// Zero-pads examples into a batch: `examples[i][b]` is example i's tensor of data_names[b], its
// real length its first dimension. Throws DataError naming the example whose non-time
// dimensions differ from the rest of the batch.
Batch pad_batch(const std::vector<std::string>& data_names,
                const std::vector<std::string>& example_names,
                const std::vector<ExampleTensors>& examples);

}  // namespace nabu
