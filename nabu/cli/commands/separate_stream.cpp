// `nabu separate --stream`: 16-bit mono PCM from stdin, at the model's rate, separated piece by
// piece by a causal model (inference/separation_stream.h) into <out>/s<k>.pcm, one 16-bit
// stream per speaker. An output that exists as a named pipe (mkfifo) is written as the pieces
// come, for a listener downstream; regular files are written under temporary names and renamed
// at the end, so an error (an odd byte count, a signal) leaves none of them behind.
#include "nabu/cli/commands/separate_stream.h"

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/inference/chunked_separation.h"
#include "nabu/inference/task_separation.h"
#include "nabu/inference/separation_stream.h"

namespace nabu::cli {

namespace {

class PcmOutput {
 public:
  explicit PcmOutput(const fs::path& path)
      : final_(path), fifo_(fs::is_fifo(path)), written_(fifo_ ? path : temporary_sibling(path)) {
    file_.open(written_, std::ios::binary | std::ios::trunc);
    if (!file_) throw Error(path.string() + ": cannot write the stream");
  }
  ~PcmOutput() {
    if (committed_ || fifo_) return;
    file_.close();
    std::error_code ignored;
    fs::remove(written_, ignored);
  }

  void write(const torch::Tensor& samples) {  // [m] float at int16 scale / 32768
    auto pcm = (samples * 32768.0).round().clamp(-32768.0, 32767.0).to(torch::kInt16).contiguous();
    file_.write(reinterpret_cast<const char*>(pcm.data_ptr<int16_t>()),
                static_cast<std::streamsize>(pcm.numel() * 2));
    file_.flush();
    if (!file_) throw Error(final_.string() + ": cannot write the stream (disk full?)");
  }
  void commit() {
    file_.close();
    if (!fifo_) rename_replace(written_, final_);
    committed_ = true;
  }
  const fs::path& path() const { return final_; }

 private:
  fs::path final_;
  bool fifo_;
  fs::path written_;
  std::ofstream file_;
  bool committed_ = false;
};

// Reads `bytes` from stdin, fewer only at its end; throws SeparationInterrupted on SIGINT or
// SIGTERM.
std::size_t read_stdin(char* data, std::size_t bytes, const StreamRequest& request) {
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::read(STDIN_FILENO, data + got, bytes - got);
    if (request.interrupted && request.interrupted() != 0)
      throw SeparationInterrupted("stream interrupted; no output kept", request.interrupted());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("stdin: cannot read the stream");
    }
    got += static_cast<std::size_t>(n);
  }
  return got;
}

}  // namespace

StreamReport stream_separation(TaskSeparation& separation, const StreamRequest& request) {
  SeparationStream stream(separation);
  const int rate = stream.sample_rate();
  const auto piece = static_cast<int64_t>(std::llround(request.piece_ms * rate / 1000.0));
  if (piece < 1)
    throw Error("--stream-ms=" + fmt::format("{}", request.piece_ms) + ": under one sample at " +
                std::to_string(rate) + " Hz");
  ensure_directory(request.out);
  std::vector<std::unique_ptr<PcmOutput>> outputs;
  for (int s = 1; s <= stream.speakers(); ++s)
    outputs.push_back(
        std::make_unique<PcmOutput>(request.out / ("s" + std::to_string(s) + ".pcm")));
  logger().info(
      "streaming 16-bit mono PCM at {} Hz from stdin in pieces of {} samples ({} ms); "
      "algorithmic latency {:.2f} ms (the piece and the model's {} samples of lookahead)",
      rate, piece, request.piece_ms, 1000.0 * (piece + stream.lookahead()) / rate,
      stream.lookahead());
  auto emit = [&](const torch::Tensor& separated) {
    for (int s = 0; s < stream.speakers(); ++s) outputs[s]->write(separated[s]);
  };
  StreamReport report;
  std::vector<char> bytes(static_cast<std::size_t>(piece) * 2);
  std::size_t carried = 0;  // an odd byte left from the last read
  using Clock = std::chrono::steady_clock;
  while (true) {
    const std::size_t wanted = bytes.size() - carried;
    const std::size_t got = read_stdin(bytes.data() + carried, wanted, request);
    const std::size_t available = carried + got;
    const std::size_t samples = available / 2;
    if (samples > 0) {
      auto pcm = torch::from_blob(bytes.data(), {static_cast<int64_t>(samples)}, torch::kInt16)
                     .to(torch::kFloat32) /
                 32768.0;
      const auto start = Clock::now();
      auto separated = stream.push(pcm);
      report.compute_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      emit(separated);
      report.samples += static_cast<int64_t>(samples);
    }
    carried = available % 2;
    if (carried) bytes[0] = bytes[available - 1];
    if (got < wanted) break;  // the end of stdin
  }
  if (carried)
    throw DataError("stdin: " + std::to_string(report.samples * 2 + 1) +
                    " bytes, not a whole number of 16-bit samples");
  emit(stream.finish());
  for (auto& output : outputs) {
    output->commit();
    report.outputs.push_back(output->path());
  }
  report.piece_samples = piece;
  report.lookahead_samples = stream.lookahead();
  report.sample_rate = rate;
  return report;
}

}  // namespace nabu::cli
