// Config keys, presets, files and their errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/presets.h"
#include "core/error.h"

namespace folio {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(Config, DefaultsAreTheShakespeareCharPreset) {
  const Config defaults, preset = load_config("shakespeare_char");
  for (const ConfigKey& key : config_keys())
    EXPECT_EQ(get_config_value(defaults, key), get_config_value(preset, key)) << key.name;
}

TEST(Config, PresetsHaveTheirRecipes) {
  const Config tiny = load_config("tiny");
  EXPECT_EQ(tiny.n_embd, 32);
  EXPECT_EQ(tiny.n_head, 3);
  EXPECT_EQ(tiny.effective_head_size(), 10);
  EXPECT_EQ(tiny.attention_width(), 30);
  EXPECT_EQ(tiny.block_size, 16);
  EXPECT_NO_THROW(validate_config(tiny));

  // Seed 004's own model: the tiny sizes, its structure and its recipe (1000 steps, eval every
  // 500 over 50 batches).
  const Config seed004 = load_config("seed004");
  for (const char* key : {"n_layer", "n_head", "n_embd", "head_size", "block_size", "dropout",
                          "batch_size", "learning_rate", "weight_decay", "max_iters"})
    EXPECT_EQ(get_config_value(seed004, *find_config_key(key)),
              get_config_value(tiny, *find_config_key(key)))
        << key;
  EXPECT_TRUE(seed004.qkv_bias);
  EXPECT_EQ(seed004.block_order, "post_norm");
  EXPECT_EQ(seed004.init, "torch_default");
  EXPECT_EQ(seed004.torch_names, "seed004");
  EXPECT_EQ(seed004.eval_interval, 500);
  EXPECT_EQ(seed004.eval_iters, 50);
  EXPECT_NO_THROW(validate_config(seed004));
  Config scaled = seed004;
  scaled.scaled_residual_init = true;  // scales init_std, which torch_default does not use
  EXPECT_NE(error_of([&] { validate_config(scaled); }).find("set init=normal"), std::string::npos);

  const Config nano = load_config("nanogpt_char");
  EXPECT_EQ(nano.activation, "gelu");
  EXPECT_FALSE(nano.bias);
  EXPECT_TRUE(nano.tie_weights);
  EXPECT_TRUE(nano.scaled_residual_init);
  EXPECT_DOUBLE_EQ(nano.beta2, 0.99);
  EXPECT_EQ(nano.decay_params, "matrices");
  EXPECT_EQ(nano.lr_schedule, "cosine");
  EXPECT_DOUBLE_EQ(nano.grad_clip, 1.0);

  const Config baby = load_config("baby");
  EXPECT_EQ(baby.block_size, 64);
  EXPECT_EQ(baby.batch_size, 12);
  EXPECT_EQ(baby.n_layer, 4);
  EXPECT_EQ(baby.max_iters, 2000);
  EXPECT_EQ(baby.lr_decay_iters, 2000);
  EXPECT_DOUBLE_EQ(baby.dropout, 0.0);
  EXPECT_EQ(baby.eval_iters, 20);
  for (const Preset& p : presets()) EXPECT_NO_THROW(validate_config(load_config(p.name))) << p.name;
}

TEST(Config, UnknownKeySuggestsTheNearest) {
  Config c;
  const std::string message = error_of([&] { set_config_value(c, "lerning_rate", "1"); });
  EXPECT_NE(message.find("unknown config key 'lerning_rate'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean learning_rate?"), std::string::npos) << message;
}

TEST(Config, MalformedAndOutOfRangeValuesNameTheKey) {
  Config c;
  EXPECT_NE(error_of([&] { set_config_value(c, "batch_size", "sixty"); }).find(
                "config key batch_size: 'sixty' is not an integer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_config_value(c, "dropout", "1.0"); }).find("out of range [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_config_value(c, "batch_size", "0"); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_config_value(c, "activation", "tanh"); }).find("relu|gelu"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_config_value(c, "learning_rate", "nan"); }).find("finite"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_config_value(c, "bias", "maybe"); }).find("boolean"),
            std::string::npos);
  EXPECT_NE(error_of([&] { set_config_value(c, "seed", "-1"); }).find("unsigned"),
            std::string::npos);
  set_config_value(c, "learning_rate", "1e-3");
  EXPECT_DOUBLE_EQ(c.learning_rate, 1e-3);
  // adam_eps 0 divides 0 by 0 for a parameter whose gradient is 0.
  EXPECT_NE(error_of([&] { set_config_value(c, "adam_eps", "0"); }).find("out of range (0, 1]"),
            std::string::npos);
  set_config_value(c, "adam_eps", "1e-30");
  EXPECT_DOUBLE_EQ(c.adam_eps, 1e-30);
  // A subnormal is finite (strtod's ERANGE on underflow had called it "not a finite number").
  set_config_value(c, "dropout", "1e-320");
  EXPECT_GT(c.dropout, 0.0);
  EXPECT_NE(error_of([&] { set_config_value(c, "dropout", "1e999"); }).find("not a finite number"),
            std::string::npos);
}

TEST(Config, HeadsMustDivideTheWidthUnlessHeadSizeIsSet) {
  Config c;
  c.n_embd = 32;
  c.n_head = 3;
  const std::string message = error_of([&] { validate_config(c); });
  EXPECT_NE(message.find("n_embd (32) is not divisible by n_head (3)"), std::string::npos);
  c.head_size = 10;
  EXPECT_NO_THROW(validate_config(c));
}

TEST(Config, FileLinesReportTheirLineNumbers) {
  Config c;
  apply_config_text(c, "# comment\nn_layer = 3  # trailing\n\nout_dir = \"my dir\"\n", "f.conf");
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.out_dir, "my dir");
  const std::string message = error_of([&] { apply_config_text(c, "\nn_layer 3\n", "f.conf"); });
  EXPECT_NE(message.find("f.conf:2: expected `key = value`"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { apply_config_text(c, "nlayer = 3\n", "f.conf"); }).find("f.conf:1"),
            std::string::npos);
}

TEST(Config, AHashInsideAQuotedValueIsPartOfIt) {
  Config c;
  apply_config_text(c, "out_dir = \"run #2\"  # the second run\ndata = a#b.txt\n", "f.conf");
  EXPECT_EQ(c.out_dir, "run #2");
  EXPECT_EQ(c.data, "a");  // unquoted: the comment starts at the #
  std::string message = error_of([&] { apply_config_text(c, "out_dir = \"run #2\n", "f.conf"); });
  EXPECT_NE(message.find("f.conf:1: the quote that begins the value"), std::string::npos) << message;
  message = error_of([&] { apply_config_text(c, "out_dir = \"a\" b\n", "f.conf"); });
  EXPECT_NE(message.find("f.conf:1: 'b' follows the quoted value"), std::string::npos) << message;
}

TEST(Config, AKeySetTwiceInAFileNamesBothValues) {
  Config c;
  const std::string message =
      error_of([&] { apply_config_text(c, "n_layer = 2\n# x\nn_layer = 3\n", "f.conf"); });
  EXPECT_NE(message.find("f.conf:3: n_layer is set twice, to '2' on line 1 and to '3' here"),
            std::string::npos)
      << message;
  EXPECT_NO_THROW(apply_config_text(c, "n_layer = 2\nn_head = 2\n", "f.conf"));
}

// warmup_iters, lr_decay_iters and min_lr had been ignored under the constant schedule (the
// default of shakespeare_char and tiny) when a user set them.
TEST(Config, CosineKeysTheUserSetsForAConstantScheduleAreRefused) {
  Config tiny = load_config("tiny");
  std::string message =
      error_of([&] { refuse_unused_schedule_keys(tiny, {"max_iters", "warmup_iters"}); });
  EXPECT_NE(message.find("warmup_iters does nothing with lr_schedule = constant: only the cosine "
                         "schedule reads it; add --lr_schedule=cosine, or drop it"),
            std::string::npos)
      << message;
  message = error_of([&] { refuse_unused_schedule_keys(tiny, {"min_lr", "lr_decay_iters"}); });
  EXPECT_NE(message.find("lr_decay_iters, min_lr do nothing"), std::string::npos) << message;
  // A preset's own values are not the user's: baby switched to constant keeps them, unread.
  Config baby = load_config("baby");
  baby.lr_schedule = "constant";
  EXPECT_NO_THROW(refuse_unused_schedule_keys(baby, {"lr_schedule"}));
  tiny.lr_schedule = "cosine";
  EXPECT_NO_THROW(refuse_unused_schedule_keys(tiny, {"warmup_iters", "lr_decay_iters", "min_lr"}));

  // A config file's keys are the user's.
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("folio_schedule_" + std::to_string(::getpid()));
  std::ofstream(file) << "lr_schedule = constant\nwarmup_iters = 5\n";
  std::vector<std::string> keys;
  const Config from_file = load_config(file.string(), &keys);
  std::filesystem::remove(file);
  EXPECT_EQ(keys, (std::vector<std::string>{"lr_schedule", "warmup_iters"}));
  EXPECT_NE(error_of([&] { refuse_unused_schedule_keys(from_file, keys); }).find("warmup_iters"),
            std::string::npos);

  // --print_config's text loads back as a config file: the keys the schedule ignores are comments.
  Config printed;
  const std::vector<std::string> printed_keys =
      apply_config_text(printed, config_to_text(baby), "printed.conf");
  EXPECT_NO_THROW(refuse_unused_schedule_keys(printed, printed_keys));
  EXPECT_EQ(printed.lr_schedule, "constant");
  EXPECT_EQ(printed.n_layer, baby.n_layer);
}

TEST(Config, JsonRoundTripsEveryKey) {
  Config c = load_config("nanogpt_char");
  c.seed = 18446744073709551615ULL;
  c.learning_rate = 0.1 + 0.2;
  Config back;
  apply_config_json(back, nlohmann::json::parse(config_to_json(c).dump()), "test");
  for (const ConfigKey& key : config_keys())
    EXPECT_EQ(get_config_value(c, key), get_config_value(back, key)) << key.name;
}

TEST(Config, UnknownPresetListsThePresets) {
  const std::string message = error_of([] { load_config("shakespeare"); });
  EXPECT_NE(message.find("not a preset (baby, gpt2, gpt2-large, gpt2-medium, gpt2-xl, "
                         "nanogpt_char, seed004, shakespeare_char, tiny)"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace folio
