#include "cli/client_session.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/identity.h"

namespace tarn::cli {

std::unique_ptr<ApiClient> OpenClient(const ClientFlags& flags, int* exit_code) {
  std::string addr = flags.addr;
  if (addr.empty()) {
    const char* env = std::getenv("TARN_ADDR");
    addr = env != nullptr && *env != '\0' ? env : kDefaultServerAddress;
  }
  auto address = ParseServerAddress(addr);
  if (!address.ok()) {
    std::cerr << "tarn: " << address.status().message() << "\n";
    *exit_code = 2;
    return nullptr;
  }
  std::optional<std::string> user = ActingUser(flags.user);
  if (!user) {
    *exit_code = 2;
    return nullptr;
  }
  ApiClient::Options options;
  options.address = *address;
  options.user = *user;
  *exit_code = 0;
  return ApiClient::Create(options);
}

int PrintError(const Status& status) {
  std::cerr << "tarn: " << status.message() << "\n";
  return 1;
}

void PrintJson(const nlohmann::json& value) {
  std::cout << value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tarn::cli
