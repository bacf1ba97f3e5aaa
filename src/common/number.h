// Whole-string number parsing for values read from files and configuration. Pure.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tarn {

// "42" -> 42, "-1" -> -1; nullopt for "", "4x", " 4", "1.5" or out of range.
inline std::optional<int64_t> ParseInt64(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "2", "0.25", "1e3" -> the number; nullopt for "", "2x", " 2", "nan", "inf" or out of range.
inline std::optional<double> ParseFiniteDouble(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if (v != v || v > 1e300 || v < -1e300) return std::nullopt;
  return v;
}

}  // namespace tarn
