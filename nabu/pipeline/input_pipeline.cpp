#include "nabu/pipeline/input_pipeline.h"

#include "nabu/core/error.h"

namespace nabu {

InputPipeline::InputPipeline(std::shared_ptr<const ExampleSource> examples, BatchPlanOptions plan,
                             bool cycle, int prefetch, PipelinePosition start, bool pin)
    : examples_(std::move(examples)), plan_(plan), cycle_(cycle), pin_(pin),
      capacity_(static_cast<std::size_t>(std::max(1, prefetch))), position_(start) {
  batches_per_epoch_ = static_cast<int64_t>(plan_epoch(examples_->lengths(0), plan_, 0).size());
  if (batches_per_epoch_ == 0) throw DataError("the data gives no batch");
  start_loader();
}

InputPipeline::~InputPipeline() { stop_loader(); }

void InputPipeline::start_loader() {
  queue_.clear();
  finished_ = stop_ = false;
  failure_ = nullptr;
  thread_ = std::thread([this, from = position_] { loader(from); });
}

void InputPipeline::stop_loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void InputPipeline::seek(PipelinePosition position) {
  stop_loader();
  position_ = position;
  start_loader();
}

void InputPipeline::loader(PipelinePosition from) {
  // Batches are read and padded on one thread: with LibTorch's OpenMP backend a copy above the
  // grain size would start a second thread team beside the trainer's, and on 2 cores the teams'
  // spinning cost the trainer a quarter of its speed. (OpenMP keeps this setting per thread.)
  at::set_num_threads(1);
  try {
    std::vector<int64_t> lengths;
    if (examples_->same_every_epoch()) lengths = examples_->lengths(0);
    for (int64_t epoch = from.epoch;; ++epoch) {
      if (!cycle_ && epoch > 0) break;
      if (!examples_->same_every_epoch()) lengths = examples_->lengths(epoch);
      auto batches = plan_epoch(lengths, plan_, epoch);
      for (int64_t b = epoch == from.epoch ? from.batch : 0;
           b < static_cast<int64_t>(batches.size()); ++b) {
        Batch batch = examples_->load(epoch, batches[b]);
        if (pin_) pin_memory(batch);
        PipelinePosition after = b + 1 < static_cast<int64_t>(batches.size())
                                     ? PipelinePosition{epoch, b + 1}
                                     : PipelinePosition{epoch + 1, 0};
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
        if (stop_) return;
        queue_.emplace_back(std::move(batch), after);
        changed_.notify_all();
      }
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
  changed_.notify_all();
}

std::optional<Batch> InputPipeline::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || finished_; });
  if (queue_.empty()) {
    if (failure_) std::rethrow_exception(failure_);
    return std::nullopt;
  }
  auto [batch, after] = std::move(queue_.front());
  queue_.pop_front();
  position_ = after;
  changed_.notify_all();
  return std::move(batch);
}

}  // namespace nabu
