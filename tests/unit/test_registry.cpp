#include <gtest/gtest.h>

#include "nabu/core/registry.h"

using namespace nabu;

namespace {
Registry<int, int>& toy_registry() {
  static Registry<int, int> registry("toy component");
  return registry;
}
}  // namespace

NABU_REGISTER(toy_registry, "double", [](int x) { return 2 * x; }, "doubles")
NABU_REGISTER(toy_registry, "triple", [](int x) { return 3 * x; }, "triples")

TEST(Registry, CreatesRegisteredAndListsNames) {
  EXPECT_EQ(toy_registry().create("double", 4), 8);
  EXPECT_EQ(toy_registry().names(), (std::vector<std::string>{"double", "triple"}));
  EXPECT_EQ(toy_registry().help("triple"), "triples");
}

TEST(Registry, UnknownNameListsKnownOnesWithClosestMatch) {
  try {
    toy_registry().create("dobule", 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown toy component 'dobule' (did you mean 'double'?); known: double, triple");
  }
}
