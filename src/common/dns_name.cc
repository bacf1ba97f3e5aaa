#include "common/dns_name.h"

namespace tarn {

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > kMaxDnsLabel) return false;
  if (s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsDnsName(std::string_view s) {
  if (s.empty() || s.size() > kMaxDnsName) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == std::string_view::npos ? s.npos : dot - start);
    if (!IsDnsLabel(label)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string UserToDnsLabel(std::string_view user) {
  std::string out;
  out.reserve(user.size());
  for (char c : user) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (c == '_') {
      out.push_back('-');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace tarn
