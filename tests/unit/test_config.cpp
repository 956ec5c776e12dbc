#include <gtest/gtest.h>

#include "nabu/core/config.h"
#include "nabu/core/error.h"

using namespace nabu;

TEST(Config, LowercasesKeysKeepsSectionCase) {
  auto config = ConfigFile::parse("[Trainer]\nBatch_Size = 4\n", "t.cfg");
  EXPECT_TRUE(config.has_section("Trainer"));
  EXPECT_FALSE(config.has_section("trainer"));
  EXPECT_EQ(config.section("Trainer").get_int("batch_size"), 4);
}
