// Input pipeline: joins, padding, bucketing, shuffling, sharding, positions and loader errors.
#include <gtest/gtest.h>

#include <set>

#include "nabu/core/error.h"
#include "nabu/pipeline/batch_plan.h"
#include "nabu/pipeline/example_set.h"
#include "nabu/pipeline/input_pipeline.h"
#include "test_helpers.h"

using namespace nabu;
using nabu::testing::TempDir;

namespace {

// A store whose example i has name prefix+i, length lengths[i] and value (store_id*1000 + i).
void make_store(const std::filesystem::path& store_dir, const std::vector<std::string>& names,
                const std::vector<int64_t>& lengths, float value_base, StoredType type,
                std::vector<int64_t> dims = {3}) {
  StoreMetadata metadata;
  metadata.stored_type = type;
  metadata.nontime_dims = dims;
  metadata.section = "s";
  metadata.segment_length = "full";
  StoreWriter writer(store_path(store_dir, "full"), metadata);
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::vector<int64_t> shape{lengths[i]};
    shape.insert(shape.end(), dims.begin(), dims.end());
    auto data = type == StoredType::kBool ? torch::ones(shape, torch::kBool)
                                          : torch::full(shape, value_base + static_cast<float>(i));
    writer.append(names[i], data, lengths[i]);
  }
  writer.commit();
}

ConfigFile database_for(const std::filesystem::path& root, const std::vector<std::string>& sections) {
  std::string text;
  for (const auto& name : sections)
    text += "[" + name + "]\ndatafiles = x\npreprocess = True\nstore_dir = " + (root / name).string() +
            "\nprocessor_config = p\n";
  return ConfigFile::parse(text, "database.conf");
}

std::vector<std::string> names(int count, const std::string& prefix = "u") {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

}  // namespace

TEST(PipelineExamples, JoinSkipsMissingAndConcatenatesSections) {
  TempDir dir;
  make_store(dir / "featA", names(5), {3, 4, 5, 6, 7}, 0, StoredType::kFloat32);
  make_store(dir / "featB", names(2, "v"), {2, 2}, 100, StoredType::kFloat32);
  // Targets lack u3; section B's targets cover v0, v1.
  make_store(dir / "targA", {"u0", "u1", "u2", "u4"}, {3, 4, 5, 7}, 0, StoredType::kBool);
  make_store(dir / "targB", names(2, "v"), {2, 2}, 0, StoredType::kBool);
  auto database = database_for(dir.path(), {"featA", "featB", "targA", "targB"});
  StoreCache cache;
  ExampleSet examples({{"features", {"featA", "featB"}}}, {{"targets", {"targA", "targB"}}},
                      database, "full", cache, "task t");
  ASSERT_EQ(examples.size(), 6);
  EXPECT_EQ(examples.skipped(), 1);
  std::vector<std::string> order;
  for (int64_t i = 0; i < examples.size(); ++i) order.push_back(examples.example_name(i));
  EXPECT_EQ(order, (std::vector<std::string>{"u0", "u1", "u2", "u4", "v0", "v1"}));

  // Section k of one name only joins with section k of another: featA with targB joins nothing.
  EXPECT_THROW(ExampleSet({{"features", {"featA"}}}, {{"targets", {"targB"}}},
                          database_for(dir.path(), {"featA", "targB"}), "full", cache, "task t"),
               DataError);
}

TEST(PipelineExamples, NoCommonExampleIsAnError) {
  TempDir dir;
  make_store(dir / "a", names(2, "x"), {2, 2}, 0, StoredType::kFloat32);
  make_store(dir / "b", names(2, "y"), {2, 2}, 0, StoredType::kFloat32);
  StoreCache cache;
  EXPECT_THROW(ExampleSet({{"f", {"a"}}}, {{"t", {"b"}}}, database_for(dir.path(), {"a", "b"}),
                          "full", cache, "task t"),
               DataError);
}

// A stage whose segment length database.conf does not store is a ConfigError naming the
// section's segment_lengths, not a missing file (the store may even be left from another run).
TEST(PipelineExamples, ASegmentLengthTheSectionDoesNotStoreIsAnErrorNamingTheKey) {
  TempDir dir;
  make_store(dir / "f", names(2), {2, 2}, 0, StoredType::kFloat32);
  StoreCache cache;
  auto database = ConfigFile::parse("[f]\ndatafiles = x\npreprocess = True\nstore_dir = " +
                                        (dir / "f").string() +
                                        "\nprocessor_config = p\nsegment_lengths = 100 full\n",
                                    "database.conf");
  std::string message = nabu::testing::error_of(
      [&] { ExampleSet({{"features", {"f"}}}, {}, database, "200", cache, "task t"); });
  EXPECT_NE(message.find("database.conf:6: [f] segment_lengths"), std::string::npos) << message;
  EXPECT_NE(message.find("'100 full' has no 200"), std::string::npos) << message;
  EXPECT_NE(message.find("'features' of task t"), std::string::npos) << message;
  EXPECT_THROW(ExampleSet({{"features", {"f"}}}, {}, database, "200", cache, "task t"),
               ConfigError);
  EXPECT_EQ(ExampleSet({{"features", {"f"}}}, {}, database, "full", cache, "task t").size(), 2);
  // Whole utterances are what `nabu test` reads too: no trainer.cfg stage is blamed for them.
  auto segments_only = ConfigFile::parse("[f]\ndatafiles = x\npreprocess = True\nstore_dir = " +
                                             (dir / "f").string() +
                                             "\nprocessor_config = p\nsegment_lengths = 100\n",
                                         "database.conf");
  message = nabu::testing::error_of([&] {
    ExampleSet({{"features", {"f"}}}, {}, segments_only, "full", cache, "test task [t]");
  });
  EXPECT_NE(message.find("'100' has no full, the whole utterances 'features' of test task [t] "
                         "reads; add it here (then run `nabu data`)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("trainer.cfg"), std::string::npos) << message;
}

TEST(PipelineExamples, PaddingAndLengths) {
  TempDir dir;
  make_store(dir / "f", names(3), {2, 5, 3}, 10, StoredType::kFloat32);
  make_store(dir / "t", names(3), {2, 5, 3}, 0, StoredType::kBool, {4});
  StoreCache cache;
  ExampleSet examples({{"features", {"f"}}}, {{"targets", {"t"}}}, database_for(dir.path(), {"f", "t"}),
                      "full", cache, "task");
  auto batch = examples.load({0, 1, 2});
  auto features = batch.data["features"];
  EXPECT_EQ(features.sizes(), (torch::IntArrayRef{3, 5, 3}));
  EXPECT_TRUE(torch::equal(batch.lengths["features"], torch::tensor({2L, 5L, 3L})));
  EXPECT_EQ(features[0][1][0].item<float>(), 10.0f);
  EXPECT_EQ(features[0][2].abs().sum().item<float>(), 0.0f);  // zero padding
  EXPECT_EQ(batch.data["targets"].dtype(), torch::kBool);     // compact until the loss needs it
  EXPECT_EQ(batch.real_frames, 10);
  EXPECT_EQ(batch.padded_frames, 15);
}

TEST(PipelineBatchPlan, EveryExampleOncePerEpochAndDeterministic) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < 103; ++i) lengths.push_back(10 + (i * 37) % 400);
  for (int buckets : {1, 8}) {
    BatchPlanOptions options;
    options.batch_size = 8;
    options.numbuckets = buckets;
    options.seed = 7;
    auto plan = plan_epoch(lengths, options, 3);
    std::multiset<int64_t> seen;
    for (const auto& batch : plan) seen.insert(batch.begin(), batch.end());
    EXPECT_EQ(seen.size(), lengths.size());
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), lengths.size());
    EXPECT_EQ(plan, plan_epoch(lengths, options, 3));
    EXPECT_NE(plan, plan_epoch(lengths, options, 4));
    options.seed = 8;
    EXPECT_NE(plan, plan_epoch(lengths, options, 3));
  }
}

TEST(PipelineBatchPlan, BucketsHoldSimilarLengthsAndCounts) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < 800; ++i) lengths.push_back(50 + (i * 7919) % 500);
  auto boundaries = bucket_boundaries(lengths, 8);
  ASSERT_EQ(boundaries.size(), 8u);
  std::vector<int> counts(8, 0);
  for (auto length : lengths)
    ++counts[std::lower_bound(boundaries.begin(), boundaries.end(), length) - boundaries.begin()];
  for (int count : counts) EXPECT_NEAR(count, 100, 10);
  BatchPlanOptions options;
  options.batch_size = 16;
  options.numbuckets = 8;
  int64_t padded = 0, real = 0;
  for (const auto& batch : plan_epoch(lengths, options, 0)) {
    int64_t longest = 0;
    for (auto index : batch) longest = std::max(longest, lengths[index]), real += lengths[index];
    padded += longest * static_cast<int64_t>(batch.size());
  }
  EXPECT_LT(static_cast<double>(padded - real) / real, 0.10);
}

TEST(PipelineBatchPlan, UnshuffledKeepsFileOrder) {
  BatchPlanOptions options;
  options.batch_size = 4;
  options.shuffle = false;
  auto plan = plan_epoch(std::vector<int64_t>(10, 5), options, 0);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan[2], (std::vector<int64_t>{8, 9}));
}

TEST(PipelineBatchPlan, ShardsAreDisjointWithEqualBatchCounts) {
  std::vector<int64_t> lengths(50, 10);
  BatchPlanOptions options;
  options.batch_size = 4;  // 13 batches: 6 per rank with 2 ranks
  options.world_size = 2;
  options.seed = 3;
  options.rank = 0;
  auto first = plan_epoch(lengths, options, 1);
  options.rank = 1;
  auto second = plan_epoch(lengths, options, 1);
  EXPECT_EQ(first.size(), second.size());
  std::set<int64_t> a, b;
  for (const auto& batch : first) a.insert(batch.begin(), batch.end());
  for (const auto& batch : second) b.insert(batch.begin(), batch.end());
  for (auto index : a) EXPECT_EQ(b.count(index), 0u);
  options.world_size = 20;
  EXPECT_THROW(plan_epoch(lengths, options, 0), Error);
}

TEST(PipelineLoader, PositionsResumeTheSameBatchesAndPassesEnd) {
  TempDir dir;
  make_store(dir / "f", names(10), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0, StoredType::kFloat32);
  StoreCache cache;
  auto examples = std::make_shared<ExampleSet>(std::vector<DataBinding>{{"features", {"f"}}},
                                               std::vector<DataBinding>{},
                                               database_for(dir.path(), {"f"}), "full", cache, "task");
  BatchPlanOptions options;
  options.batch_size = 3;
  options.seed = 11;
  InputPipeline uninterrupted(examples, options, true, 2);
  std::vector<std::vector<std::string>> expected;
  PipelinePosition saved;
  for (int i = 0; i < 9; ++i) {  // three epochs of 4 batches
    if (i == 5) saved = uninterrupted.position();
    expected.push_back(uninterrupted.next()->names);
  }
  EXPECT_EQ(saved, (PipelinePosition{1, 1}));
  InputPipeline resumed(examples, options, true, 2, saved);
  for (int i = 5; i < 9; ++i) EXPECT_EQ(resumed.next()->names, expected[i]) << i;

  InputPipeline single(examples, options, false, 2);
  int count = 0;
  while (single.next()) ++count;
  EXPECT_EQ(count, 4);
  EXPECT_FALSE(single.next().has_value());
}

TEST(PipelineLoader, LoaderErrorsReachTheConsumerWithTheExampleNamed) {
  TempDir dir;
  make_store(dir / "f", names(4), {2, 2, 2, 2}, 0, StoredType::kFloat32);
  make_store(dir / "g", names(4), {2, 2, 2, 2}, 0, StoredType::kFloat32, {5});
  StoreCache cache;
  // Two sections with different dims for one name: the batch cannot be formed.
  auto examples = std::make_shared<ExampleSet>(
      std::vector<DataBinding>{{"features", {"f", "g"}}}, std::vector<DataBinding>{},
      database_for(dir.path(), {"f", "g"}), "full", cache, "task");
  BatchPlanOptions options;
  options.batch_size = 8;
  options.shuffle = false;
  InputPipeline pipeline(examples, options, false, 2);
  try {
    pipeline.next();
    FAIL() << "expected an error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("other dimensions"), std::string::npos) << e.what();
  }
}
