// tarn.autoscale.* read through the parser: defaults, every key's range, the checks between
// keys and against the component, each error at the key it is about.
#include "spec/autoscale.h"

#include <gtest/gtest.h>

#include "spec/parser_checks_for_test.h"

namespace tarn::spec {
namespace {

json Scaled(const json& props, int64_t count = 1) {
  json j = Base();
  j["components"][0]["number_of_containers"] = count;
  j["components"][0]["configuration"]["properties"] = props;
  return j;
}

std::string KeyPath(const std::string& key) {
  return "components[0].configuration.properties[\"" + key + "\"]";
}

TEST(AutoscaleTest, NoneWithoutItsKeysAndDefaultsWithMaxAlone) {
  EXPECT_FALSE(Ok(ParseJson(Base())).components[0].autoscale.has_value());
  Assembly a = Ok(ParseJson(Scaled({{"tarn.autoscale.max", "4"}})));
  ASSERT_TRUE(a.components[0].autoscale.has_value());
  const Autoscale& s = *a.components[0].autoscale;
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 4);
  EXPECT_EQ(s.target_in_flight, 2);
  EXPECT_EQ(s.tolerance, 0.1);
  EXPECT_EQ(s.stable_window_secs, 60);
  EXPECT_EQ(s.panic_window_secs, 6);
  EXPECT_EQ(s.panic_threshold, 2.0);
  EXPECT_EQ(s.scale_down_delay_secs, 300);
}

TEST(AutoscaleTest, EveryKeyIsRead) {
  Assembly a = Ok(ParseJson(Scaled({{"tarn.autoscale.min", "2"},
                                    {"tarn.autoscale.max", "8"},
                                    {"tarn.autoscale.target_in_flight", "0.5"},
                                    {"tarn.autoscale.tolerance", "0"},
                                    {"tarn.autoscale.stable_window_secs", "20"},
                                    {"tarn.autoscale.panic_window_secs", "4"},
                                    {"tarn.autoscale.panic_threshold", "1.5"},
                                    {"tarn.autoscale.scale_down_delay_secs", "0"}},
                                   3)));
  const Autoscale& s = a.components[0].autoscale.value();
  EXPECT_EQ(s, (Autoscale{2, 8, 0.5, 0, 20, 4, 1.5, 0}));
}

TEST(AutoscaleTest, EachValueOutOfItsRangeIsNamed) {
  const std::pair<const char*, const char*> bad[] = {
      {"tarn.autoscale.min", "0"},
      {"tarn.autoscale.max", "10001"},
      {"tarn.autoscale.target_in_flight", "0"},
      {"tarn.autoscale.target_in_flight", "many"},
      {"tarn.autoscale.tolerance", "1"},
      {"tarn.autoscale.stable_window_secs", "1.5"},
      {"tarn.autoscale.panic_threshold", "1"},
      {"tarn.autoscale.scale_down_delay_secs", "-1"},
  };
  for (const auto& [key, value] : bad) {
    ExpectError(
        Scaled({{"tarn.autoscale.max", key == std::string("tarn.autoscale.max") ? value : "4"},
                {key, value}}),
        KeyPath(key), std::string("\"") + value + "\" is not");
  }
}

TEST(AutoscaleTest, UnknownKeyAndTheServiceLevelAreRefused) {
  ExpectError(Scaled({{"tarn.autoscale.max", "4"}, {"tarn.autoscale.target", "3"}}),
              KeyPath("tarn.autoscale.target"), "tarn.autoscale.target_in_flight");
  json j = Base();
  j["configuration"]["properties"]["tarn.autoscale.max"] = "4";
  ExpectError(j, "configuration.properties[\"tarn.autoscale.max\"]", "belongs on a component");
}

TEST(AutoscaleTest, TheKeysMustHoldTogether) {
  ExpectError(Scaled({{"tarn.autoscale.min", "2"}}, 2), KeyPath("tarn.autoscale.max"),
              "is required");
  ExpectError(Scaled({{"tarn.autoscale.min", "3"}, {"tarn.autoscale.max", "2"}}, 2),
              KeyPath("tarn.autoscale.max"), "below tarn.autoscale.min 3");
  ExpectError(Scaled({{"tarn.autoscale.max", "2"}, {"tarn.autoscale.panic_window_secs", "90"}}),
              KeyPath("tarn.autoscale.panic_window_secs"), "longer than the stable window (60 s)");
  ExpectError(Scaled({{"tarn.autoscale.max", "2"}}, 3), "components[0].number_of_containers",
              "outside tarn.autoscale.min..max (1..2)");
  ExpectError(
      Scaled({{"tarn.autoscale.max", "2"}, {"tarn.tf.role", "worker"}, {"tarn.tf.port", "2222"}}),
      KeyPath("tarn.autoscale.max"), "fixed size");
}

}  // namespace
}  // namespace tarn::spec
