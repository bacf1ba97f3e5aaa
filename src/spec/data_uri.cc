#include "spec/data_uri.h"

#include "common/base64.h"

namespace tarn::spec {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

StatusOr<std::string> DecodeDataUri(std::string_view uri) {
  if (!IsDataUri(uri)) return InvalidArgumentError("not a data: URI");
  size_t comma = uri.find(',');
  if (comma == std::string_view::npos) {
    return InvalidArgumentError("a data: URI needs a ',' before its data");
  }
  std::string_view header = uri.substr(5, comma - 5);
  std::string_view data = uri.substr(comma + 1);
  bool base64 = header.size() >= 7 && header.substr(header.size() - 7) == ";base64";
  std::string out;
  if (base64) {
    auto decoded = Base64Decode(data);
    if (!decoded.ok()) return InvalidArgumentError("the data: URI has invalid base64");
    return decoded;
  }
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '%') {
      if (i + 2 >= data.size()) {
        return InvalidArgumentError("the data: URI has a truncated %-escape");
      }
      int hi = HexValue(data[i + 1]), lo = HexValue(data[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgumentError("the data: URI has an invalid %-escape");
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(data[i]);
    }
  }
  return out;
}

std::string EncodeDataUri(std::string_view bytes) { return "data:;base64," + Base64Encode(bytes); }

}  // namespace tarn::spec
