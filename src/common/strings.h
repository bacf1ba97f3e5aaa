// Small string helpers shared across tarn.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tarn {

// The comma-separated items of `text`, empty ones dropped: "a,,b," -> {"a", "b"}. No
// trimming: " a" stays " a".
inline std::vector<std::string> SplitCommas(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace tarn
