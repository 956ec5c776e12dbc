// Nabu's public C++ API: separation with a trained experiment (the folder `nabu train` wrote) or
// a file `nabu export` wrote, from an application. Installed with the library (`cmake --install`);
// an application does
//
//     find_package(Nabu REQUIRED)
//     target_link_libraries(app PRIVATE Nabu::nabu)
//
// and includes only this header: it names no LibTorch, HDF5 or other Nabu type. Errors are thrown
// as std::runtime_error carrying the one-line message the command line prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

// What libnabu exports: the API below and nothing else (the library is compiled with hidden
// visibility; to an application the attribute only repeats the default).
#define NABU_API __attribute__((visibility("default")))

namespace nabu::api {

// The library's version, "major.minor.patch" (the package's; libnabu.so.major.minor).
NABU_API const char* version();

// One signal per speaker, each as long as the input, at the input's rate and level.
using Signals = std::vector<std::vector<float>>;

// What a separation knows of its own weak spots (docs/api.md, "When a result is likely poor").
struct Caution {
  std::string kind;     // "near_pitch": two outputs' median pitches within the model's weak range
  std::string message;  // one line, as nabu separate prints it
};

// A separation and what it measured of its outputs.
struct Separation {
  Signals signals;
  std::vector<double> median_f0_hz;  // of each signal (0: no voiced frame)
  std::vector<Caution> cautions;     // empty when nothing is known to be wrong
};

struct SeparatorOptions {
  std::string task;             // experiment: the test task (default: test_evaluator.cfg's first)
  std::string model = "final";  // experiment: final or avg (average_checkpoints)
  double chunk_seconds = 8.0;   // long signals are separated in chunks (0 = whole signals)
  double overlap_seconds = 1.0;  // speakers are matched and cross-faded on the overlap
  int threads = 0;              // LibTorch's intra-op threads (0: its default)
  // Cautions: outputs whose median pitches lie fewer semitones apart than this are voices the
  // model separates poorly. Negative: the model's own range (an exported file's model.json, as
  // the shipped models have, else 4); 0: never.
  double near_pitch_semitones = -1.0;
  // The library's log lines of this level and above ("trace", "debug", "info", "warn", "error",
  // "off"): to stderr, or to `log` when it is set; never to stdout. The setting is the
  // library's, shared by every Separator of the process.
  std::string log_level = "warn";
  std::function<void(const std::string& level, const std::string& message)> log;
};

class Stream;

class NABU_API Separator {
 public:
  // A trained experiment folder, as `nabu separate --expdir` takes it.
  static Separator from_experiment(const std::string& expdir, const SeparatorOptions& options = {});
  // A file written by `nabu export --format=torchscript`.
  static Separator from_exported(const std::string& file, const SeparatorOptions& options = {});
  Separator(Separator&&) noexcept;
  Separator& operator=(Separator&&) noexcept;
  ~Separator();

  int sample_rate() const;  // the rate the model was trained at
  int speakers() const;
  // What the experiment's training said of its final model, one line each: a training whose
  // validation never improved on its start handed back an untrained model. Empty when all is
  // well, and for exported files.
  std::vector<std::string> warnings() const;
  // Mono samples at `rate` (any rate: resampled to the model's and back), in [-1, 1] as audio
  // files hold them; the separated speakers at the input's rate, length and level, in chunks as
  // `nabu separate` does. Throws for a signal shorter than one analysis frame, silent or with NaN.
  Signals separate(const std::vector<float>& samples, int rate);
  // The same, with each output's median pitch and the cautions nabu separate prints.
  Separation separate_with_cautions(const std::vector<float>& samples, int rate);
  // A stream through a causal model of an experiment (conv_tasnet with causal = True): push
  // pieces at sample_rate(), get the separated pieces back. Throws naming why a model cannot.
  // The Separator must outlive its streams.
  Stream stream();

 private:
  struct Impl;
  explicit Separator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class NABU_API Stream {
 public:
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  ~Stream();
  // The next `count` samples (at the model's rate, in [-1, 1]); returns what became final, at the
  // input's level so far (up to lookahead() samples fewer than pushed in all).
  Signals push(const float* samples, std::size_t count);
  // The end of the signal: the rest (in total, as many samples as were pushed).
  Signals finish();
  // Samples an output lags its input by, beyond the piece pushed.
  int64_t lookahead() const;

 private:
  friend class Separator;
  struct Impl;
  explicit Stream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reading and writing audio files (libsndfile): `read_audio` mixes channels down to mono in
// [-1, 1]; `write_audio` writes a 32-bit float wav, atomically.
struct Audio {
  std::vector<float> samples;
  int sample_rate = 0;
};
NABU_API Audio read_audio(const std::string& path);
NABU_API void write_audio(const std::string& path, const std::vector<float>& samples, int sample_rate);

}  // namespace nabu::api
