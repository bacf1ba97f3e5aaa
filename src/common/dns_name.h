// DNS naming rules shared by the assembly validator and (later) the registry.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tarn {

inline constexpr size_t kMaxDnsLabel = 63;
inline constexpr size_t kMaxDnsName = 253;

// True when `s` is a lowercase RFC 1123 label: [a-z0-9] and '-', 1..63 characters, not
// starting or ending with '-'.
bool IsDnsLabel(std::string_view s);

// True when `s` is one or more dot-separated labels that each pass IsDnsLabel, within 253
// characters (a domain such as "tarn" or "ml.example.com").
bool IsDnsName(std::string_view s);

// Maps a user name to the label YARN's registry uses: lowercase, '_' -> '-'
// ("Bob_dev" -> "bob-dev"). The result may still be an invalid label (e.g. "a.b"); callers
// check it with IsDnsLabel.
std::string UserToDnsLabel(std::string_view user);

}  // namespace tarn
