// The INI reader against the Python 2.7 ConfigParser semantics of docs/ini_semantics.md, one test
// per item.
#include <gtest/gtest.h>

#include <set>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/core/options.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "test_helpers.h"

using namespace nabu;
using nabu::testing::error_of;
using nabu::testing::TempDir;
using nabu::testing::write_text;

namespace {

ConfigFile parse(const std::string& text) { return ConfigFile::parse(text, "t.cfg"); }

}  // namespace

// §4.1: a comment is a line whose first character is '#' or ';' (or "rem ").
TEST(ConfigSpec, CommentLines) {
  auto config = parse("# top\n[s]\n; semi\na = 1\n#processor_config = x\nrem old stuff\nb = 2\n");
  EXPECT_EQ(config.section("s").keys(), (std::vector<std::string>{"a", "b"}));
}

// §4.1: an indented '#' line after a key is a continuation for Python, not a comment.
TEST(ConfigSpec, IndentedHashIsContinuation) {
  auto config = parse("[s]\na = 1\n  # not a comment\n");
  EXPECT_EQ(config.section("s").get_string("a"), "1\n# not a comment");
}

// §4.2: ';' starts an inline comment only after whitespace; '#' inside a value is literal.
TEST(ConfigSpec, InlineComments) {
  auto config = parse("[s]\na = value ; comment\nb = x;y\nc = path#1\n");
  EXPECT_EQ(config.section("s").get_string("a"), "value");
  EXPECT_EQ(config.section("s").get_string("b"), "x;y");
  EXPECT_EQ(config.section("s").get_string("c"), "path#1");
}

// §4.3: repeated keys: the last wins; repeated sections merge.
TEST(ConfigSpec, LastDuplicateWins) {
  auto config = parse("[s]\nmeanandvar_dir = globalvars\nmeanandvar_dir = /explicit\n[t]\nx = 1\n"
                      "[s]\nz = 3\n");
  const auto& section = config.section("s");
  EXPECT_EQ(section.get_string("meanandvar_dir"), "/explicit");
  EXPECT_EQ(section.find("meanandvar_dir")->origin.line, 3);
  EXPECT_EQ(section.get_string("z"), "3");
  EXPECT_EQ(config.section_names(), (std::vector<std::string>{"s", "t"}));
}

// §4.4: an indented line continues the previous value with '\n', and is warned about.
TEST(ConfigSpec, ContinuationLines) {
  auto config = parse("[trainspec]\nmeanandvar_dir = globalvars\n    processor_config = a.cfg\n");
  const auto& section = config.section("trainspec");
  EXPECT_EQ(section.get_string("meanandvar_dir"), "globalvars\nprocessor_config = a.cfg");
  EXPECT_FALSE(section.has("processor_config"));
  ASSERT_EQ(config.warnings().size(), 1u);
  EXPECT_NE(config.warnings()[0].find("t.cfg:3"), std::string::npos);
}

// §4.5: values are stripped, spaces around '=' are optional, lists split on spaces.
TEST(ConfigSpec, ValuesAndLists) {
  auto config = parse("[s]\ntargets = binary_targets usedbins   \ndatafiles =/a/b.scp\nm= 1\n");
  const auto& section = config.section("s");
  EXPECT_EQ(section.get_list("targets"), (std::vector<std::string>{"binary_targets", "usedbins"}));
  EXPECT_EQ(section.get_string("datafiles"), "/a/b.scp");
  EXPECT_EQ(section.get_int("m"), 1);
}

// §4.6: `key =` is an empty value; a bare key is an error naming file:line.
TEST(ConfigSpec, EmptyValuesAndBareKeys) {
  auto config = parse("[s]\ntargets =\n");
  EXPECT_EQ(config.section("s").get_string("targets"), "");
  EXPECT_TRUE(config.section("s").get_list("targets").empty());
  auto message = error_of([] { parse("[s]\nbare_key\n"); });
  EXPECT_NE(message.find("t.cfg:2"), std::string::npos) << message;
}

// §4.7: the first '=' or ':' delimits; values may contain ':'.
TEST(ConfigSpec, Delimiters) {
  auto config = parse("[s]\na: 1\nurl = http://host:80/x\n");
  EXPECT_EQ(config.section("s").get_string("a"), "1");
  EXPECT_EQ(config.section("s").get_string("url"), "http://host:80/x");
}

// §4.8: keys are lowercased, section names keep their case.
TEST(ConfigSpec, Case) {
  auto config = parse("[Trainer]\nBatch_Size = 4\n");
  EXPECT_TRUE(config.has_section("Trainer"));
  EXPECT_FALSE(config.has_section("trainer"));
  EXPECT_EQ(config.section("Trainer").keys(), (std::vector<std::string>{"batch_size"}));
  EXPECT_EQ(config.section("Trainer").get_int("BATCH_SIZE"), 4);
}

// §4.9: booleans are exactly True/False; numbers follow Python int()/float().
TEST(ConfigSpec, BooleansAndNumbers) {
  auto config = parse("[s]\nt = True\nf = False\ny = yes\nlr = 1e-3\nd = 1.5878e-6\n"
                      "i = 20000000\nnot_int = 1.0\nnone = None\n");
  const auto& s = config.section("s");
  EXPECT_TRUE(s.get_bool("t"));
  EXPECT_FALSE(s.get_bool("f"));
  EXPECT_THROW(s.get_bool("y"), ConfigError);
  EXPECT_DOUBLE_EQ(s.get_double("lr"), 1e-3);
  EXPECT_DOUBLE_EQ(s.get_double("d"), 1.5878e-6);
  EXPECT_EQ(s.get_int("i"), 20000000);
  auto message = error_of([&] { s.get_int("not_int"); });
  EXPECT_NE(message.find("t.cfg:8: [s] not_int: expected an integer"), std::string::npos)
      << message;
  EXPECT_EQ(s.get_string("none"), "None");
  EXPECT_TRUE(s.get_bool("missing", true));
}

// §4.10: per-segment lists are indexed by segment position; learning_rate_decay may broadcast.
TEST(ConfigSpec, PerSegmentLists) {
  auto config = parse("[trainer]\nsegment_lengths = 100 full\nbatch_size = 40 8\n"
                      "learning_rate_decay = 1.5878e-6\nnumbatches_to_aggregate = 2\n");
  const auto& t = config.section("trainer");
  EXPECT_EQ(t.get_per_segment("batch_size", 1, 2), "8");
  EXPECT_EQ(t.get_per_segment("learning_rate_decay", 1, 2, true), "1.5878e-6");
  auto message = error_of([&] { t.get_per_segment("numbatches_to_aggregate", 1, 2); });
  EXPECT_NE(message.find("expected 2 space-separated values"), std::string::npos) << message;
}

// §4.11: "globalvars" takes the same key from [globalvars]; a missing one names the key.
TEST(ConfigSpec, GlobalvarsSubstitution) {
  auto config = parse("[globalvars]\nsegment_lengths = 100 full\n[trainspec]\n"
                      "segment_lengths = globalvars\nmeanandvar_dir = globalvars\nstore_dir = x\n");
  auto message = error_of([&] { resolve_globalvars(config.section("trainspec"), config); });
  EXPECT_NE(message.find("[trainspec] meanandvar_dir"), std::string::npos) << message;
  config.section("globalvars").set("meanandvar_dir", "/stats", {"t.cfg", 2});
  auto resolved = resolve_globalvars(config.section("trainspec"), config);
  EXPECT_EQ(resolved.get_string("segment_lengths"), "100 full");
  EXPECT_EQ(resolved.get_string("meanandvar_dir"), "/stats");
  EXPECT_EQ(resolved.get_string("store_dir"), "x");
}

// §4.12: a stale processor_config path falls back to the file of that name in the recipe.
TEST(ConfigSpec, ProcessorConfigFallback) {
  TempDir dir;
  write_text(dir / "recipe/feature_processor.cfg", "[processor]\nprocessor = audio_feat_processor\n");
  write_text(dir / "recipe/database.conf",
             "[trainspec]\nprocessor_config = /no/such/dir/feature_processor.cfg\n"
             "[devspec]\nprocessor_config = /no/such/dir/missing_processor.cfg\n");
  auto recipe = Recipe::load(dir / "recipe");
  const auto& database = recipe.get("database.conf");
  EXPECT_EQ(recipe.processor_config_path(database.section("trainspec")),
            dir / "recipe" / "feature_processor.cfg");
  EXPECT_EQ(recipe.processor_config(database.section("trainspec"))
                .section("processor")
                .get_string("processor"),
            "audio_feat_processor");
  auto message = error_of([&] { recipe.processor_config_path(database.section("devspec")); });
  EXPECT_NE(message.find("[devspec] processor_config"), std::string::npos) << message;
}

// §4.13: lines of any length (212 recipe lines exceed inih's 200 characters).
TEST(ConfigSpec, LongLines) {
  std::string long_value(1 << 20, 'x');
  auto config = parse("[s]\ndatafiles = " + long_value + "\nnext = 1\n");
  EXPECT_EQ(config.section("s").get_string("datafiles").size(), long_value.size());
  EXPECT_EQ(config.section("s").get_int("next"), 1);
}

// §4.14: no interpolation: '%' is literal.
TEST(ConfigSpec, NoInterpolation) {
  auto config = parse("[s]\na = %(b)s 100%\n");
  EXPECT_EQ(config.section("s").get_string("a"), "%(b)s 100%");
}

// §4.15: files without a final newline, and CRLF line ends.
TEST(ConfigSpec, NoFinalNewlineAndCrlf) {
  EXPECT_EQ(parse("[s]\na = 1").section("s").get_int("a"), 1);
  EXPECT_EQ(parse("[s]\r\na = 1\r\n").section("s").get_int("a"), 1);
}

// §4.16: the writer emits ConfigParser.write's shape and round-trips.
TEST(ConfigSpec, WriterRoundTrip) {
  auto config = parse("# comment\n[trainer]\nBatch_size=40 8\ncont = a\n  b\n\n[task_2spk]\nx = 1");
  std::string written = config.to_string();
  EXPECT_EQ(written, "[trainer]\nbatch_size = 40 8\ncont = a\n\tb\n\n[task_2spk]\nx = 1\n\n");
  auto again = ConfigFile::parse(written, "again.cfg");
  EXPECT_EQ(again.to_string(), written);
  EXPECT_EQ(again.section("trainer").get_string("cont"), "a\nb");
}

TEST(ConfigErrors, SyntaxErrorsNameFileAndLine) {
  EXPECT_NE(error_of([] { parse("[s]\n[unterminated\n"); }).find("t.cfg:2: unterminated"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse("a = 1\n[s]\n"); }).find("t.cfg:1"), std::string::npos);
  EXPECT_NE(error_of([] { parse(std::string("[s]\na = \0\x01", 9)); }).find("not a text file"),
            std::string::npos);
  std::string huge(1 << 20, 'y');
  auto message = error_of([&] { parse("[s]\n" + huge + "\n"); });
  EXPECT_NE(message.find("t.cfg:2"), std::string::npos);
  EXPECT_LT(message.size(), 300u) << "a 1 MB bad line must not become a 1 MB message";
}

TEST(ConfigErrors, MissingFileAndDirectory) {
  TempDir dir;
  EXPECT_NE(error_of([&] { ConfigFile::load(dir / "nope.cfg"); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ConfigFile::load(dir.path()); }).find("is a directory"),
            std::string::npos);
}

TEST(ConfigErrors, OriginsInTypedGetters) {
  auto config = parse("[main]\nnum_units = many\n");
  auto message = error_of([&] { config.section("main").get_int("num_units"); });
  EXPECT_EQ(message, "t.cfg:2: [main] num_units: expected an integer, got 'many'");
  message = error_of([&] { config.section("main").get_int("num_layer"); });
  EXPECT_NE(message.find("required key is missing"), std::string::npos);
  message = error_of([&] { config.section("mian"); });
  EXPECT_NE(message.find("did you mean 'main'"), std::string::npos) << message;
}

TEST(ConfigOverrides, ParseAndApply) {
  auto override_ = ConfigOverride::parse("model.cfg:main:Num_Units=64");
  EXPECT_EQ(override_.file, "model.cfg");
  EXPECT_EQ(override_.section, "main");
  EXPECT_EQ(override_.key, "num_units");
  EXPECT_EQ(override_.value, "64");
  auto value_with_colon = ConfigOverride::parse("database.conf:trainspec:store_dir=a:b=c");
  EXPECT_EQ(value_with_colon.value, "a:b=c");
  EXPECT_THROW(ConfigOverride::parse("model.cfg:main"), ConfigError);
  EXPECT_THROW(ConfigOverride::parse("model.cfg=3"), ConfigError);

  auto config = parse("[main]\nnum_units = 600\n");
  EXPECT_EQ(apply_overrides(config, "model.cfg", {override_}), 1);
  EXPECT_EQ(config.section("main").get_int("num_units"), 64);
  EXPECT_EQ(config.section("main").where("num_units"), "--set: [main] num_units");
  auto bad_section = ConfigOverride::parse("model.cfg:mian:num_units=1");
  auto message = error_of([&] { apply_overrides(config, "model.cfg", {bad_section}); });
  EXPECT_NE(message.find("did you mean 'main'"), std::string::npos) << message;
}

TEST(ConfigOverrides, RecipeRejectsUnknownTargetFile) {
  TempDir dir;
  write_text(dir / "model.cfg", "[main]\nnum_units = 600\n");
  auto recipe = Recipe::load(dir.path(), {ConfigOverride::parse("model.cfg:main:num_units=8")});
  EXPECT_EQ(recipe.get("model.cfg").section("main").get_int("num_units"), 8);
  auto message = error_of([&] {
    Recipe::load(dir.path(), {ConfigOverride::parse("modle.cfg:main:num_units=8")});
  });
  EXPECT_NE(message.find("has no file 'modle.cfg' (did you mean 'model.cfg'?)"), std::string::npos)
      << message;
}

TEST(ConfigOverrides, SavedCopyIsLoadableAndPointsAtCopiedProcessorConfigs) {
  TempDir dir;
  write_text(dir / "recipe/feature_processor.cfg", "[processor]\nnfft = 256\n");
  write_text(dir / "recipe/database.conf",
             "[trainspec]\nprocessor_config = /stale/feature_processor.cfg\n");
  auto recipe =
      Recipe::load(dir / "recipe", {ConfigOverride::parse("feature_processor.cfg:processor:nfft=512")});
  recipe.save_copy(dir / "exp");
  auto copy = Recipe::load(dir / "exp");
  const auto& section = copy.get("database.conf").section("trainspec");
  EXPECT_EQ(copy.processor_config_path(section), std::filesystem::absolute(dir / "exp/feature_processor.cfg"));
  EXPECT_EQ(copy.processor_config(section).section("processor").get_int("nfft"), 512);
}

namespace {
struct ToyOptions {
  int num_units = 600;
  double dropout = 1.0;
  bool layer_norm = false;
  std::vector<int> t_reset{10};
  void declare(OptionsReader& r) {
    r("num_units", num_units, "units");
    r("dropout", dropout, "keep probability");
    r("layer_norm", layer_norm, "layer normalisation");
    r("t_reset", t_reset, "reset period per layer");
    r.accepted("fac_per_layer", "growth factor");
  }
};
}  // namespace

TEST(ConfigOptions, TypedFieldsDefaultsAndUnknownKeys) {
  auto config = parse("[main]\nnum_units = 64\nlayer_norm = True\nt_reset = 5 12\n"
                      "fac_per_layer = 1.0\n");
  auto options = read_options<ToyOptions>(config.section("main"), "toy");
  EXPECT_EQ(options.num_units, 64);
  EXPECT_DOUBLE_EQ(options.dropout, 1.0);
  EXPECT_TRUE(options.layer_norm);
  EXPECT_EQ(options.t_reset, (std::vector<int>{5, 12}));

  auto typo = parse("[main]\nnum_unit = 64\n");
  auto message = error_of([&] { read_options<ToyOptions>(typo.section("main"), "toy"); });
  EXPECT_EQ(message, "t.cfg:2: [main] num_unit: unknown key for toy (did you mean 'num_units'?)");
  auto docs = describe_options<ToyOptions>();
  ASSERT_EQ(docs.size(), 5u);
  EXPECT_EQ(docs[0].key, "num_units");
  EXPECT_EQ(docs[0].default_value, "600");
}

// A UTF-8 byte order mark (Windows editors write one) is not part of the first line.
TEST(ConfigSpec, ByteOrderMarkIsSkipped) {
  auto config = parse("\xEF\xBB\xBF[main]\nnum_units = 3\n");
  EXPECT_EQ(config.section_names(), (std::vector<std::string>{"main"}));
  EXPECT_EQ(config.section("main").get_int("num_units"), 3);
  EXPECT_EQ(config.section("main").find("num_units")->origin.line, 2);
  EXPECT_TRUE(config.warnings().empty());
}

// §4.3: a repeated key or section is read as Python 2.7 reads it (the last value wins, sections
// merge) and warned about with both places.
TEST(ConfigSpec, RepeatedKeysAndSectionsAreWarnedAboutWithBothPlaces) {
  auto config = parse("[s]\nmeanandvar_dir = globalvars\nmeanandvar_dir = /explicit\n[t]\nx = 1\n"
                      "[s]\nz = 3\nMeanAndVar_dir = /last\n");
  EXPECT_EQ(config.section("s").get_string("meanandvar_dir"), "/last");
  EXPECT_EQ(config.section("s").find("meanandvar_dir")->origin.line, 8);
  EXPECT_EQ(config.warnings(),
            (std::vector<std::string>{
                "t.cfg:3: [s] meanandvar_dir is given again (previously at t.cfg:2); this last "
                "value is used",
                "t.cfg:6: section [s] is given again (first at t.cfg:1); the two are merged, a "
                "key in both taking its last value",
                "t.cfg:8: [s] meanandvar_dir is given again (previously at t.cfg:3); this last "
                "value is used"}));
}

// A line without '=' or ':' is one error naming file:line and the line.
TEST(ConfigErrors, ALineWithoutDelimiterNamesFileLineAndText) {
  EXPECT_EQ(error_of([] { parse("[main]\nnum_units 300\n"); }),
            "t.cfg:2: cannot parse 'num_units 300' (expected 'key = value' or '[section]')");
}

// A required key that is missing: one line naming the section's line, the key and the key of the
// section that is likely its misspelling, from a getter, an options rule or the model bank.
TEST(ConfigErrors, AMissingRequiredKeyNamesTheSectionAndTheLikelyMisspelling) {
  auto config = parse("# model\n[main]\narchtecture = dblstm\nnum_units = 3\n");
  const std::string expected =
      "t.cfg:2: [main] architecture: required key is missing (is 'archtecture' at t.cfg:3 a "
      "misspelling of it?)";
  EXPECT_EQ(error_of([&] { config.section("main").get_string("architecture"); }), expected);
  struct Needs {
    std::string architecture;
    int num_units = 1;
    void declare(OptionsReader& r) {
      r("architecture", architecture, "the model");
      r("num_units", num_units, "units");
      r.require(!architecture.empty(), "architecture", "is empty");
    }
  };
  EXPECT_EQ(error_of([&] { read_options<Needs>(config.section("main"), "needs"); }), expected);
  // Without a look-alike, no guess.
  auto plain = parse("[main]\nnum_units = 3\n");
  EXPECT_EQ(error_of([&] { plain.section("main").get_string("architecture"); }),
            "t.cfg:1: [main] architecture: required key is missing");
}

// An override naming a section the file lacks lists that file's sections; the file is not
// reported missing, and "did you mean" never suggests the word it was given.
TEST(ConfigOverrides, AnUnknownSectionListsTheSectionsOfThatFile) {
  TempDir dir;
  write_text(dir / "model.cfg", "[hyper]\nmodel_names = main\n[main]\nnum_units = 600\n");
  std::vector<std::string> errors;
  Recipe::load(dir.path(), {ConfigOverride::parse("model.cfg:nosec:x=1")}, &errors);
  ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0], "--set 'model.cfg:nosec:x=1': " + (dir / "model.cfg").string() +
                           " has no section [nosec]; its sections: hyper, main");
  EXPECT_EQ(did_you_mean("model.cfg", {"model.cfg", "loss.cfg"}), "");
}

// With an error list (nabu check), a file that does not parse is its one error: the recipe marks
// it unreadable instead of missing, and an override of it is not "no such file".
TEST(ConfigOverrides, AFileThatDoesNotParseIsUnreadableNotMissing) {
  TempDir dir;
  write_text(dir / "model.cfg", "[main]\nnum_units 300\n");
  std::vector<std::string> errors;
  auto recipe =
      Recipe::load(dir.path(), {ConfigOverride::parse("model.cfg:main:num_units=3")}, &errors);
  ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0], (dir / "model.cfg").string() +
                           ":2: cannot parse 'num_units 300' (expected 'key = value' or "
                           "'[section]')");
  EXPECT_EQ(recipe.unreadable(), (std::set<std::string>{"model.cfg"}));
}

// nabu recipe new edits a copied recipe and writes it over the copied text: comments, blank lines
// and untouched values stay; a changed value is rewritten in its place, continuation lines
// included; a removed key or section (with the comment block right above it) goes; new keys follow
// their section's last option, new sections come last. What is written parses to the edit.
TEST(ConfigWriter, AnEditWrittenOverItsTextKeepsTheComments) {
  const std::string text =
      "# what this file is\n"
      "[trainer]\n"
      "# the learning rate per stage\n"
      "initial_learning_rate = 1e-3 5e-4  ; inline\n"
      "tasks = a\n"
      "segment_lengths = 100\n"
      "    full\n"
      "\n"
      "# kept section\n"
      "[a]\n"
      "loss_type = pit\n"
      "\n"
      "# The held-out test: evaluation only;\n"
      "# run it with --task.\n"
      "[heldout]\n"
      "loss_type = pit\n"
      "\n"
      "[last]\n"
      "x = 1\n";
  ConfigFile edited = ConfigFile::parse(text, "trainer.cfg");
  ConfigSection& trainer = edited.section("trainer");
  trainer.set("segment_lengths", "200\nfull", trainer.find("segment_lengths")->origin);
  trainer.erase("tasks");
  trainer.set("max_steps", "10", {});
  ConfigFile out("trainer.cfg");
  for (const auto& section : edited.sections()) {
    if (section.name() == "heldout") continue;
    ConfigSection& copy = out.add_section(section.name(), section.origin());
    for (const auto& [key, value] : section.entries()) copy.set(key, value.text, value.origin);
  }
  out.add_section("new").set("y", "2", {});
  const std::string written = out.to_string_over(text);
  EXPECT_EQ(written,
            "# what this file is\n"
            "[trainer]\n"
            "# the learning rate per stage\n"
            "initial_learning_rate = 1e-3 5e-4  ; inline\n"
            "segment_lengths = 200\n"
            "\tfull\n"
            "max_steps = 10\n"
            "\n"
            "# kept section\n"
            "[a]\n"
            "loss_type = pit\n"
            "\n"
            "[last]\n"
            "x = 1\n"
            "\n"
            "[new]\n"
            "y = 2\n");
  const ConfigFile reread = ConfigFile::parse(written, "trainer.cfg");
  EXPECT_EQ(reread.section("trainer").get_string("segment_lengths"), "200\nfull");
  EXPECT_FALSE(reread.section("trainer").has("tasks"));
  EXPECT_EQ(reread.section("trainer").get_string("initial_learning_rate"), "1e-3 5e-4");
  EXPECT_FALSE(reread.has_section("heldout"));
  EXPECT_EQ(reread.section("new").get_string("y"), "2");
  // Unedited, the text comes back as it was.
  EXPECT_EQ(ConfigFile::parse(text, "trainer.cfg").to_string_over(text), text);
}
