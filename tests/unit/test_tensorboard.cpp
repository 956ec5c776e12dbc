// TensorBoard event files (core/tensorboard.h): CRC-32C against the published check values, the
// protocol-buffer bytes against encodings written out field by field, the TFRecord framing read
// back, and the scalars of metrics.jsonl records. tests/tensorboard/read_events.py reads a
// trained experiment's files with TensorBoard's own reader.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "nabu/core/fs.h"
#include "nabu/core/tensorboard.h"
#include "test_helpers.h"
#include "training_fixture.h"

namespace nabu {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

template <class T>
std::string little_endian(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

template <class T>
T read_little_endian(const std::string& data, std::size_t offset) {
  T value;
  std::memcpy(&value, data.data() + offset, sizeof(T));
  return value;
}

// The records of a TFRecord file, each frame's two checksums verified.
std::vector<std::string> read_records(const std::filesystem::path& path) {
  const std::string data = read_file(path);
  std::vector<std::string> records;
  std::size_t offset = 0;
  while (offset < data.size()) {
    EXPECT_LE(offset + 12, data.size());
    const auto length = read_little_endian<uint64_t>(data, offset);
    EXPECT_EQ(read_little_endian<uint32_t>(data, offset + 8),
              masked_crc32c(data.substr(offset, 8)));
    const std::string record = data.substr(offset + 12, length);
    EXPECT_EQ(read_little_endian<uint32_t>(data, offset + 12 + length), masked_crc32c(record));
    records.push_back(record);
    offset += 12 + length + 4;
  }
  return records;
}

TEST(TensorBoard, Crc32cMatchesThePublishedCheckValues) {
  // RFC 3720 (iSCSI), appendix B.4, and the common check value of "123456789".
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  // TFRecord's mask: rotate right by 15, add a constant.
  const uint32_t crc = crc32c("abc");
  EXPECT_EQ(masked_crc32c("abc"), ((crc >> 15) | (crc << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, ScalarEventBytesAreTheEventProtocolBuffer) {
  // Event{wall_time: 1.5, step: 300, summary{value{tag: "a/b", simple_value: 2.0}}}
  const std::string value = bytes({0x0A, 3}) + "a/b" + bytes({0x15}) + little_endian(2.0f);
  const std::string summary = bytes({0x0A, static_cast<int>(value.size())}) + value;
  const std::string expected = bytes({0x09}) + little_endian(1.5) +
                               bytes({0x10, 0xAC, 0x02}) +  // 300 as a varint
                               bytes({0x2A, static_cast<int>(summary.size())}) + summary;
  EXPECT_EQ(tensorboard_proto::scalars_event(1.5, 300, {{"a/b", 2.0}}), expected);
  // Step 0 is proto3's default and is not written.
  EXPECT_EQ(tensorboard_proto::file_version_event(2.0),
            bytes({0x09}) + little_endian(2.0) + bytes({0x1A, 13}) + "brain.Event:2");
  // SessionLog{status: START} in field 7 (6 is the deprecated log_message).
  EXPECT_EQ(tensorboard_proto::session_start_event(2.0, 7),
            bytes({0x09}) + little_endian(2.0) + bytes({0x10, 7, 0x3A, 2, 0x08, 1}));
}

TEST(TensorBoard, ScalarsShareOneSummary) {
  const std::string event = tensorboard_proto::scalars_event(1.0, 1, {{"x", 1.0}, {"y", 2.0}});
  const std::string x = bytes({0x0A, 1}) + "x" + bytes({0x15}) + little_endian(1.0f);
  const std::string y = bytes({0x0A, 1}) + "y" + bytes({0x15}) + little_endian(2.0f);
  const std::string summary = bytes({0x0A, 8}) + x + bytes({0x0A, 8}) + y;
  EXPECT_EQ(event, bytes({0x09}) + little_endian(1.0) + bytes({0x10, 1, 0x2A, 20}) + summary);
}

TEST(TensorBoard, HistogramCountsEveryValueOnce) {
  const std::string event = tensorboard_proto::histogram_event(0.0, 1, "w", {0.0, 1.0, 1.0, 3.0});
  // HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5 (doubles), then the packed limits
  // (field 6) and counts (field 7) of 30 buckets.
  const std::string histo_fields = bytes({0x09}) + little_endian(0.0) + bytes({0x11}) +
                                   little_endian(3.0) + bytes({0x19}) + little_endian(4.0) +
                                   bytes({0x21}) + little_endian(5.0) + bytes({0x29}) +
                                   little_endian(11.0);
  ASSERT_NE(event.find(histo_fields), std::string::npos);
  const std::size_t counts_at = event.find(bytes({0x3A, static_cast<char>(240), 0x01}));
  ASSERT_NE(counts_at, std::string::npos);
  std::vector<double> counts(30);
  std::memcpy(counts.data(), event.data() + counts_at + 3, 30 * sizeof(double));
  EXPECT_EQ(counts[0], 1.0);   // 0 (the first bucket also holds the minimum)
  EXPECT_EQ(counts[9], 2.0);   // 1.0 is the upper limit of bucket 10 of 30 over [0, 3]
  EXPECT_EQ(counts[29], 1.0);  // 3
  double total = 0;
  for (double c : counts) total += c;
  EXPECT_EQ(total, 4.0);
}

TEST(TensorBoard, WavBytesAreA16BitMonoWaveFile) {
  const std::string wav = wav_bytes({0.0f, 0.5f, -1.0f, 2.0f}, 8000);
  ASSERT_EQ(wav.size(), 44u + 8u);
  EXPECT_EQ(wav.substr(0, 4), "RIFF");
  EXPECT_EQ(wav.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(read_little_endian<uint32_t>(wav, 24), 8000u);
  EXPECT_EQ(read_little_endian<int16_t>(wav, 44 + 2), 16384);
  EXPECT_EQ(read_little_endian<int16_t>(wav, 44 + 4), -32767);
  EXPECT_EQ(read_little_endian<int16_t>(wav, 44 + 6), 32767);  // clipped
}

TEST(TensorBoard, RecordScalarsAreEveryNumberOfARecord) {
  const auto record = nlohmann::json::parse(
      R"({"type": "train", "stage": "100", "step": 4, "loss": 0.5, "lr": 0.001,
          "task_losses": {"task_2spk": 0.25}, "seconds": 0.5, "examples": 16, "note": "text",
          "norms": {"main": {"parameters": 3.0}}, "flags": [1, 2], "bad": null})");
  std::map<std::string, double> scalars;
  for (const auto& [tag, value] : record_scalars(record)) scalars[tag] = value;
  const std::map<std::string, double> expected{{"train/loss", 0.5},
                                               {"train/lr", 0.001},
                                               {"train/task_losses/task_2spk", 0.25},
                                               {"train/seconds", 0.5},
                                               {"train/examples", 16},
                                               {"train/norms/main/parameters", 3.0},
                                               {"train/flags/0", 1},
                                               {"train/flags/1", 2},
                                               {"train/seconds_per_update", 0.5},
                                               {"train/examples_per_second", 32}};
  EXPECT_EQ(scalars, expected);
}

TEST(TensorBoard, WriterFramesEveryEventAndStartsASession) {
  const auto dir = std::filesystem::temp_directory_path() / "nabu_tensorboard_test";
  std::filesystem::remove_all(dir);
  std::filesystem::path first, second;
  {
    TensorBoardWriter writer(dir / "100", 5);
    writer.scalars({{"train/loss", 1.25}}, 6);
    writer.audio("validation/audio", 6, {0.0f, 0.1f}, 8000);
    first = writer.path();
  }
  {
    TensorBoardWriter writer(dir / "100", 5);  // a second run of the same stage
    second = writer.path();
  }
  EXPECT_NE(first, second);
  EXPECT_NE(first.filename().string().find("events.out.tfevents."), std::string::npos);
  const auto records = read_records(first);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find(bytes({0x10, 5, 0x3A, 2, 0x08, 1})), std::string::npos);  // START at 5
  EXPECT_NE(records[2].find(std::string("train/loss") + bytes({0x15}) + little_endian(1.25f)),
            std::string::npos);
  EXPECT_NE(records[3].find("audio/wav"), std::string::npos);
  EXPECT_EQ(read_records(second).size(), 2u);
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace testing {

// A training aborted at update 8 (a crash) and resumed from its checkpoint at update 5 logs
// updates 6 and 7 twice; TensorBoard's own reader (tests/tensorboard/read_events.py, in the test
// venv ./run tests makes) must find every number of metrics.jsonl once, at its step, and (with
// log_norms) every parameter's histogram at every validation and (histogram_steps = 2) every
// second update, once.
TEST_F(TrainingRun, TensorBoardReaderFindsEveryMetricOnceAfterAResume) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: ./run tests makes the test venv "
                                  << "from tests/requirements.txt";
  const std::string options =
      "--max-steps=10,4 --set trainer.cfg:trainer:valid_frequency=5 "
      "--set trainer.cfg:trainer:log_norms=True --set trainer.cfg:trainer:histogram_steps=2";
  auto crashed = run_shell("env NABU_TEST_ABORT_AT_STEP=8 '" + std::string(NABU_BINARY) +
                               "' train --expdir=exp_tb " + tiny_dc(options),
                           dir_.path());
  ASSERT_NE(crashed.exit_code, 0) << crashed.output;
  auto resumed = run_nabu("train --expdir=exp_tb --resume --threads=1", dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string metrics = read_text(dir_ / "exp_tb/100/metrics.jsonl");
  // Update 7's record twice: trained before the crash and again after the resume.
  std::size_t logged = 0;
  for (auto at = metrics.find("\"step\":7,\"task_losses\""); at != std::string::npos;
       at = metrics.find("\"step\":7,\"task_losses\"", at + 1))
    ++logged;
  ASSERT_EQ(logged, 2u) << metrics;
  auto read = run_shell("'" + python + "' '" + std::string(NABU_SOURCE_DIR) +
                            "/tests/tensorboard/read_events.py' exp_tb --histogram-steps 2",
                        dir_.path());
  EXPECT_EQ(read.exit_code, 0) << read.output;
  EXPECT_NE(read.output.find("stage(s) read back"), std::string::npos) << read.output;
}

// validation_evaluator.cfg's tensorboard_audio = 2 with validation_metric = si_sdr: TensorBoard's
// reader finds the separated signals of two validation utterances at every validation and their
// references at the first, as WAV files; with validation by loss the key is refused in one line.
TEST_F(TrainingRun, TensorBoardAudioHoldsTheSeparatedValidationUtterances) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing";
  auto trained = run_nabu(
      "train --expdir=exp_audio " +
          tiny_dc("--max-steps=4,1 --set trainer.cfg:trainer:valid_frequency=2"
                  " --set validation_evaluator.cfg:task_2spk:validation_metric=si_sdr"
                  " --set validation_evaluator.cfg:task_2spk:metric_utts=3"
                  " --set validation_evaluator.cfg:task_2spk:tensorboard_audio=2"),
      dir_.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto read = run_shell("'" + python + "' '" + std::string(NABU_SOURCE_DIR) +
                            "/tests/tensorboard/read_events.py' exp_audio --audio 2",
                        dir_.path());
  EXPECT_EQ(read.exit_code, 0) << read.output;
  EXPECT_NE(read.output.find("stage(s) read back"), std::string::npos) << read.output;

  auto refused = run_nabu(
      "train --expdir=exp_audio_loss " +
          tiny_dc("--max-steps=1,1 --set validation_evaluator.cfg:task_2spk:tensorboard_audio=2"),
      dir_.path());
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("[task_2spk] tensorboard_audio: the task validates by its loss"),
            std::string::npos)
      << refused.output;
}

}  // namespace testing
}  // namespace nabu
