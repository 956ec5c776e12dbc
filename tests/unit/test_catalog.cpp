// The catalog of registered components: config/defaults/ is what `nabu list --write-defaults`
// writes, and every generated file is a recipe section that the component itself accepts.
#include <gtest/gtest.h>

#include <set>

#include "nabu/catalog/catalog.h"
#include "nabu/core/config.h"
#include "test_helpers.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) files.insert(fs::relative(entry.path(), dir).string());
  return files;
}

}  // namespace

TEST(Catalog, ConfigDefaultsAreInSyncWithTheOptionStructs) {
  TempDir temp;
  auto written = write_default_configs(temp.path());
  fs::path shipped = fs::path(NABU_SOURCE_DIR) / "config" / "defaults";
  EXPECT_EQ(files_under(temp.path()), files_under(shipped))
      << "regenerate with: build/nabu list --write-defaults config/defaults";
  for (const auto& file : written) {
    if (!fs::exists(shipped / file)) continue;
    EXPECT_EQ(read_text(temp / file), read_text(shipped / file))
        << file << " is stale; regenerate with: build/nabu list --write-defaults config/defaults";
  }
}

TEST(Catalog, EveryGeneratedDefaultParsesAndNamesItsComponent) {
  TempDir temp;
  for (const auto& file : write_default_configs(temp.path())) {
    auto config = ConfigFile::load(temp / file);
    ASSERT_EQ(config.sections().size(), 1u) << file;
    const auto& section = config.sections().front();
    std::string name = fs::path(file).stem().string();
    bool names_it = false;
    for (const auto& [key, value] : section.entries()) names_it = names_it || value.text == name;
    EXPECT_TRUE(names_it) << file;
  }
}

TEST(Catalog, ListWritesDefaultsAndRejectsAnUnknownFamily) {
  TempDir temp;
  auto written = run_nabu("list --write-defaults " + (temp / "defaults").string());
  EXPECT_EQ(written.exit_code, 0) << written.output;
  EXPECT_TRUE(fs::exists(temp / "defaults" / "architecture" / "dblstm.cfg"));
  auto bad = run_nabu("list architectur");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("did you mean 'architecture'"), std::string::npos) << bad.output;
}
