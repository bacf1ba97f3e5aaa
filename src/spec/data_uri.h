// RFC 2397 data: URIs, the form in which an assembly carries a config file's contents
// inline (the client reads a local src_file and sends it this way). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tarn::spec {

inline bool IsDataUri(std::string_view s) { return s.substr(0, 5) == "data:"; }

// Decodes "data:[<mediatype>][;base64],<data>" (percent-encoding when not base64).
StatusOr<std::string> DecodeDataUri(std::string_view uri);

// "data:;base64,<base64 of bytes>".
std::string EncodeDataUri(std::string_view bytes);

}  // namespace tarn::spec
