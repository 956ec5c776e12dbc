// A background loader over an ExampleSource (stores or dynamic mixtures): batches are read and padded on their own thread into
// a bounded queue, so the trainer never waits when the data rate allows. Training pipelines cycle
// over epochs forever; evaluation pipelines make one pass. The position of the next batch the
// consumer gets is part of the checkpoint.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "nabu/pipeline/batch_plan.h"
#include "nabu/pipeline/example_source.h"

namespace nabu {

struct PipelinePosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // index within the epoch's plan
  bool operator==(const PipelinePosition& other) const {
    return epoch == other.epoch && batch == other.batch;
  }
};

class InputPipeline {
 public:
  // `cycle`: repeat epochs forever (training); otherwise a single pass over epoch 0.
  // `pin`: batches come in page-locked memory (for models on a GPU; see pin_memory in batch.h).
  InputPipeline(std::shared_ptr<const ExampleSource> examples, BatchPlanOptions plan, bool cycle,
                int prefetch = 4, PipelinePosition start = {}, bool pin = false);
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // The next batch; nullopt at the end of a single pass. A loader error is rethrown here.
  std::optional<Batch> next();
  // Where the next call of next() continues (save this in checkpoints).
  PipelinePosition position() const { return position_; }
  // Restarts the loader at `position` (checkpoint restore).
  void seek(PipelinePosition position);
  // Batches in one epoch (for this rank).
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const ExampleSource& examples() const { return *examples_; }

 private:
  void start_loader();
  void stop_loader();
  void loader(PipelinePosition from);

  std::shared_ptr<const ExampleSource> examples_;
  BatchPlanOptions plan_;
  bool cycle_;
  bool pin_ = false;
  std::size_t capacity_;
  int64_t batches_per_epoch_ = 0;
  PipelinePosition position_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<Batch, PipelinePosition>> queue_;  // batch and the position after it
  bool finished_ = false, stop_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace nabu
