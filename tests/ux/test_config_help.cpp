// `folio train --help` describes every field of Config: the key table has one row per field
// (counted at compile time, so a field added without a row fails here), every row has help text,
// and the help lists every key with its type and default.
#include <gtest/gtest.h>

#include <set>

#include "cli/commands.h"
#include "config/config.h"

namespace folio {
namespace {

// Converts to any field type; only ever named in unevaluated requires-expressions.
struct AnyField {
  template <typename T>
  operator T() const;
};

// The number of fields of an aggregate: the most AnyFields it can be brace-initialised from.
template <typename Aggregate, typename... Fields>
constexpr size_t aggregate_field_count() {
  if constexpr (requires { Aggregate{Fields{}..., AnyField{}}; })
    return aggregate_field_count<Aggregate, Fields..., AnyField>();
  else
    return sizeof...(Fields);
}

struct ThreeFields {
  int a;
  std::string b;
  double c = 1;
};
static_assert(aggregate_field_count<ThreeFields>() == 3, "the field count itself works");

TEST(ConfigHelp, EveryFieldOfConfigHasAKey) {
  EXPECT_EQ(aggregate_field_count<Config>(), config_keys().size())
      << "a Config field without a row in config/config_keys.cpp (or a row too many)";
}

TEST(ConfigHelp, EveryKeyNamesItsOwnFieldAndHasHelp) {
  std::set<std::string> names;
  for (size_t i = 0; i < config_keys().size(); ++i) {
    const ConfigKey& key = config_keys()[i];
    EXPECT_TRUE(names.insert(key.name).second) << "two rows named " << key.name;
    EXPECT_GT(std::string(key.help).size(), 10u) << key.name << " has no real help text";
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(config_keys()[j].member == key.member)
          << key.name << " and " << config_keys()[j].name << " describe the same field";
  }
}

TEST(ConfigHelp, HelpListsEveryKeyWithTypeDefaultAndMeaning) {
  const std::string help = config_keys_help();
  const Config defaults;
  for (const ConfigKey& key : config_keys()) {
    std::string value = get_config_value(defaults, key);
    if (value.empty()) value = "\"\"";
    const std::string entry = std::string("--") + key.name + " (" + config_key_type(key) + ", " +
                              value + ")\n        " + key.help + "\n";
    EXPECT_NE(help.find(entry), std::string::npos) << "help lacks: " << entry;
  }
}

}  // namespace
}  // namespace folio
