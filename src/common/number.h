// Whole-string integer parsing for values read from files and configuration. Pure.
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

}  // namespace tarn
