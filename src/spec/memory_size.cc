#include "spec/memory_size.h"

#include <array>
#include <utility>

#include "spec/diagnostics.h"

namespace tarn::spec {
namespace {

constexpr int64_t kMib = int64_t{1} << 20;

struct Unit {
  std::string_view suffix;
  __int128 bytes;
};

constexpr __int128 P(int base, int exp) {
  __int128 v = 1;
  for (int i = 0; i < exp; ++i) v *= base;
  return v;
}

constexpr std::array<Unit, 10> kUnits = {{
    {"k", P(1000, 1)},
    {"M", P(1000, 2)},
    {"G", P(1000, 3)},
    {"T", P(1000, 4)},
    {"P", P(1000, 5)},
    {"Ki", P(1024, 1)},
    {"Mi", P(1024, 2)},
    {"Gi", P(1024, 3)},
    {"Ti", P(1024, 4)},
    {"Pi", P(1024, 5)},
}};

Status NotASize(std::string_view text, std::string_view hint) {
  std::string m = Quote(text) + " is not a memory size (use e.g. \"4096\" or \"4Gi\"";
  if (!hint.empty()) {
    m += "; ";
    m += hint;
  }
  m += ")";
  return InvalidArgumentError(std::move(m));
}

}  // namespace

StatusOr<int64_t> ParseMemoryMib(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) {
    if (!text.empty() && text[0] == '-') return NotASize(text, "it must not be negative");
    return NotASize(text, "");
  }
  if (i > 18) return NotASize(text, "the number is too large");
  int64_t number = 0;
  for (size_t k = 0; k < i; ++k) number = number * 10 + (text[k] - '0');
  std::string_view suffix = text.substr(i);
  if (suffix.empty()) return number;  // plain number: MiB, as YARN
  if (suffix[0] == '.') return NotASize(text, "use a whole number with a smaller unit");
  if (suffix[0] == ' ') return NotASize(text, "write the unit right after the number");
  for (const Unit& u : kUnits) {
    if (suffix != u.suffix) continue;
    __int128 bytes = static_cast<__int128>(number) * u.bytes;
    __int128 mib = (bytes + kMib - 1) / kMib;
    if (mib > (__int128{1} << 62)) return NotASize(text, "the size is too large");
    return static_cast<int64_t>(mib);
  }
  if (suffix == "m") return NotASize(text, "\"m\" would mean milli; write M or Mi");
  if (suffix == "B" || suffix == "b") return NotASize(text, "a plain number is MiB");
  return NotASize(text, "units are k, M, G, T, P (powers of 1000) or Ki, Mi, Gi, Ti, Pi");
}

std::string FormatMemoryMib(int64_t mib) {
  if (mib > 0 && mib % (int64_t{1} << 20) == 0) return std::to_string(mib >> 20) + "Ti";
  if (mib > 0 && mib % 1024 == 0) return std::to_string(mib / 1024) + "Gi";
  return std::to_string(mib) + "Mi";
}

}  // namespace tarn::spec
