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
                              value + "; " + scope_name(key.scope) + ")\n        " + key.help +
                              "\n";
    EXPECT_NE(help.find(entry), std::string::npos) << "help lacks: " << entry;
  }
}

TEST(ConfigHelp, PresetHelpShowsThePresetsDefaults) {
  Config tiny;
  tiny.n_layer = 2;
  EXPECT_NE(config_keys_help(tiny).find("--n_layer (int, 2; model)"), std::string::npos);
  EXPECT_NE(config_keys_markdown(tiny).find("| `n_layer` | int | `2` | model |"),
            std::string::npos);
}

// The resume rule and the ranks' agreement follow from the scope alone: what a step computes
// (model, recipe) never changes on resume and every rank must agree on it; how long and how
// loudly (run) may change on resume but the ranks agree on it (log_interval decides which steps
// read the loss, a collective); where (host) may change and may differ between ranks.
TEST(ConfigScope, ResumeAndRankRulesFollowFromTheScope) {
  std::set<std::string> resume_may_change, ranks_may_differ;
  for (const ConfigKey& key : config_keys()) {
    if (may_change_on_resume(key)) resume_may_change.insert(key.name);
    if (!ranks_must_agree(key)) ranks_may_differ.insert(key.name);
  }
  EXPECT_EQ(
      resume_may_change,
      (std::set<std::string>{"max_iters", "log_interval", "sample_tokens", "checkpoint_interval",
                             "data", "out_dir", "device", "threads", "dist_timeout", "tokenizer",
                             "cuda_graph", "batch_split"}));
  // data and tokenizer are paths: the ranks check the data's identity (tokenizer included).
  // cuda_graph changes how a step is launched, not its bits (and only one process replays).
  // threads and batch_split change how a rank's step is spread over its cores: the rounding of
  // its sums, as any change of threads does, not what it computes; each rank sums its own.
  // overlap_gradient_sums is not here: the ranks' sums are collectives that must match, and with
  // more than two ranks the buckets change their rounding.
  EXPECT_EQ(ranks_may_differ, (std::set<std::string>{"data", "tokenizer", "out_dir", "device",
                                                     "threads", "dist_timeout", "cuda_graph",
                                                     "batch_split"}));
  for (const char* structural : {"n_layer", "n_head", "n_embd", "head_size", "block_size", "bias",
                                 "activation", "tie_weights"})
    EXPECT_EQ(find_config_key(structural)->scope, ConfigScope::kModel) << structural;
}

}  // namespace
}  // namespace folio
