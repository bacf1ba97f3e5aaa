#include "cli/client_session.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/identity.h"

namespace tarn::cli {

using json = nlohmann::json;

std::unique_ptr<ApiClient> OpenClient(const ClientFlags& flags, int* exit_code, Acting* acting_out) {
  *exit_code = 2;
  std::string addr = flags.addr;
  if (addr.empty()) {
    const char* env = std::getenv("TARN_ADDR");
    if (env != nullptr) addr = env;
  }
  ApiClient::Options options;
  if (addr.empty()) {
    addr = "unix:" + SocketPath(flags.socket);
  }
  auto address = ParseServerAddress(addr);
  if (!address.ok()) {
    std::cerr << "tarn: " << address.status().message() << "\n";
    return nullptr;
  }
  options.address = *address;
  if (options.address.kind == ServerAddress::Kind::kTcp) {
    options.token = BearerToken();
    options.ca_file = flags.cacert;
    if (options.ca_file.empty()) {
      const char* env = std::getenv("TARN_CACERT");
      if (env != nullptr) options.ca_file = env;
    }
  }
  std::optional<Acting> acting = ResolveActing(flags.as, flags.user);
  if (!acting) return nullptr;
  options.act_as = acting->as;
  if (acting_out != nullptr) *acting_out = *acting;
  options.tenant = flags.tenant;
  *exit_code = 0;
  return ApiClient::Create(options);
}

int Show(const std::string& path, const ClientFlags& flags,
         const std::function<std::string(const json&)>& format, const Query& query) {
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto answer = client->Get(path, query);
  if (!answer.ok()) return PrintError(answer.status());
  if (flags.output == "json") {
    PrintJson(*answer);
  } else {
    std::cout << format(*answer);
  }
  return 0;
}

int Change(const std::function<StatusOr<json>(ApiClient&)>& request, const std::string& done,
           const ClientFlags& flags) {
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto answer = request(*client);
  if (!answer.ok()) return PrintError(answer.status());
  if (flags.output == "json") {
    PrintJson(*answer);
    return 0;
  }
  std::string diagnostics;
  if (answer->is_object()) {
    auto it = answer->find("diagnostics");
    if (it != answer->end() && it->is_string()) diagnostics = it->get<std::string>();
  }
  std::cout << (diagnostics.empty() ? done : diagnostics) << "\n";
  return 0;
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
