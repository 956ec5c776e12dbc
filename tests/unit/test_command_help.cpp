// What a command's --help shows a new user must work: the files its example names ship with the
// repository.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/trainers/sweep_file.h"
#include "test_helpers.h"

using namespace nabu;
using namespace nabu::testing;

TEST(CommandHelp, TheSweepExampleNamesASweepFileThatShipsAndApplies) {
  auto help = run_nabu("sweep --help", source_dir());
  ASSERT_EQ(help.exit_code, 0) << help.output;
  std::smatch recipe, sweep;
  ASSERT_TRUE(std::regex_search(help.output, recipe, std::regex("--recipe=(\\S+)"))) << help.output;
  ASSERT_TRUE(std::regex_search(help.output, sweep, std::regex("--sweep=(\\S+)"))) << help.output;
  const fs::path recipe_dir = source_dir() / recipe[1].str();
  const fs::path sweep_file = source_dir() / sweep[1].str();
  ASSERT_TRUE(fs::is_regular_file(sweep_file)) << sweep_file;
  auto blocks = parse_sweep_file(sweep_file.string());
  ASSERT_GE(blocks.size(), 2u);
  // Every block changes keys the example's recipe has.
  Recipe shipped = Recipe::load(recipe_dir);
  for (const auto& block : blocks) {
    EXPECT_NO_THROW(Recipe::load(recipe_dir, block.overrides)) << block.name;
    for (const auto& change : block.overrides)
      EXPECT_TRUE(shipped.get(change.file).section(change.section).has(change.key)) << change.spec;
  }
}

// The example of separating with no training names a model that ships (models/<name>).
TEST(CommandHelp, TheSeparateExampleNamesAShippedModel) {
  auto help = run_nabu("separate --help", source_dir());
  ASSERT_EQ(help.exit_code, 0) << help.output;
  std::smatch model;
  ASSERT_TRUE(std::regex_search(help.output, model,
                                std::regex("Example: nabu separate --model=(\\S+)")))
      << help.output;
  EXPECT_TRUE(fs::is_regular_file(source_dir() / "models" / model[1].str() / "card.md"))
      << model[1].str() << " is not a shipped model";
}

// nabu --help and export --help name both formats and every architecture both export (the
// architectures whose forward has a TorchScript and an ONNX description).
TEST(CommandHelp, ExportNamesBothFormatsAndTheModelsTheyTake) {
  auto overview = run_nabu("--help", source_dir());
  EXPECT_NE(overview.output.find("one TorchScript or ONNX file"), std::string::npos)
      << overview.output;
  auto help = run_nabu("export --help", source_dir());
  ASSERT_EQ(help.exit_code, 0) << help.output;
  for (const char* name : {"ONNX", "onnxruntime", "conv_tasnet", "dprnn", "tf_gridnet", "dblstm",
                           "nabu separate --model=F"})
    EXPECT_NE(help.output.find(name), std::string::npos) << name << "\n" << help.output;
}
