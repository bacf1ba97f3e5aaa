// RFC 4648 base64 (standard alphabet, '=' padding). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tarn {

std::string Base64Encode(std::string_view bytes);
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace tarn
