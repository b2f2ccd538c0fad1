// Hostile config text, as the fuzz target (tests/fuzz/fuzz_config.cpp) feeds it: values that the
// C parsing functions would half-accept, and configs whose model sizes overflow. Regression tests
// for what review and fuzzing found.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "test_helpers.h"

namespace folio {
namespace {

using testing::error_message;

std::string set_error(const std::string& key, const std::string& value) {
  Config config;
  return error_message([&] { set_config_value(config, key, value); });
}

TEST(ConfigHostile, AnUnsignedValueMustStartWithADigit) {
  // strtoull skips white space that trim() keeps (\v, \f) and wraps "-1" to 2^64 - 1.
  EXPECT_NE(set_error("seed", "\v-1").find("is not an unsigned integer"), std::string::npos);
  EXPECT_NE(set_error("seed", "\f7").find("is not an unsigned integer"), std::string::npos);
  EXPECT_NE(set_error("seed", "+7").find("is not an unsigned integer"), std::string::npos);
  Config config;
  set_config_value(config, "seed", "18446744073709551615");
  EXPECT_EQ(config.seed, 18446744073709551615ULL);
  EXPECT_NE(set_error("seed", "18446744073709551616").find("too large"), std::string::npos);
}

TEST(ConfigHostile, TextAfterANulByteIsNotIgnored) {
  // The C parsers stop at a NUL; the whole value must be the number.
  EXPECT_NE(set_error("n_layer", std::string("4\0garbage", 9)).find("not an integer"),
            std::string::npos);
  EXPECT_NE(set_error("dropout", std::string("0.1\0x", 5)).find("not a number"), std::string::npos);
  EXPECT_NE(set_error("seed", std::string("5\0", 2)).find("not an unsigned integer"),
            std::string::npos);
}

TEST(ConfigHostile, BytesAboveAsciiAreRefusedAsBooleans) {
  // Each byte went through ::tolower as a (negative) char: undefined behaviour.
  for (const char* value : {"tru\xc3\xa9", "\xff", "\x80on", "TRUE\xe2\x80\x8b"})
    EXPECT_NE(set_error("bias", value).find("is not a boolean"), std::string::npos) << value;
  Config config;
  set_config_value(config, "bias", "OFF");
  EXPECT_FALSE(config.bias);
}

TEST(ConfigHostile, AttentionTooWideForTheModelIsRefused) {
  // n_head and head_size are each in range, but 3 * 4096 * 2^20 qkv rows overflow an int.
  Config config;
  set_config_value(config, "n_head", "4096");
  set_config_value(config, "head_size", "1048576");
  EXPECT_NE(error_message([&] { validate_config(config); }).find("is too large"),
            std::string::npos);
  set_config_value(config, "head_size", "174762");  // 3 * 4096 * 174762 < 2^31
  EXPECT_EQ(error_message([&] { validate_config(config); }), "");
}

TEST(ConfigHostile, JsonConfigsRoundTrip) {
  Config config;
  apply_config_json(config, nlohmann::json::parse(R"({"out_dir":"a\nb #c","seed":7,"dropout":0})"),
                    "test");
  Config again;
  apply_config_json(again, config_to_json(config), "again");
  EXPECT_EQ(config_to_json(again), config_to_json(config));
  EXPECT_EQ(again.out_dir, "a\nb #c");
  EXPECT_NE(error_message([&] {
              apply_config_json(config, nlohmann::json::parse(R"({"n_layer":[1]})"), "json");
            }).find("wrong type"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              apply_config_json(config, nlohmann::json::parse(R"({"n_layer":1e300})"), "json");
            }).find("is not an integer"),
            std::string::npos);
}

}  // namespace
}  // namespace folio
