#include "spec/data_uri.h"

namespace tarn::spec {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

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
    out.reserve(data.size() / 4 * 3);
    uint32_t acc = 0;
    int bits = 0;
    size_t pad = 0;
    for (char c : data) {
      if (c == '=') {
        ++pad;
        continue;
      }
      int v = Base64Value(c);
      if (v < 0 || pad > 0) return InvalidArgumentError("the data: URI has invalid base64");
      acc = (acc << 6) | static_cast<uint32_t>(v);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out.push_back(static_cast<char>((acc >> bits) & 0xff));
      }
    }
    if (pad > 2 || bits >= 6) return InvalidArgumentError("the data: URI has invalid base64");
    return out;
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

std::string EncodeDataUri(std::string_view bytes) {
  std::string out = "data:;base64,";
  size_t i = 0;
  while (i + 3 <= bytes.size()) {
    uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                 (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                 static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
    i += 3;
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace tarn::spec
