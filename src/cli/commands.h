// The verbs of the tarn binary. Each returns the process exit status: 0 success, 1 the input
// was rejected (errors printed on stderr), 2 usage.
#pragma once

#include <string>
#include <vector>

namespace tarn::cli {

struct AssemblyFlags {
  std::string user;  // empty: $TARN_USER, else the account
  std::string domain = "tarn";
};

int RunValidate(const std::vector<std::string>& files, const AssemblyFlags& flags);
int RunExplain(const std::string& file, const std::string& output, const AssemblyFlags& flags);

}  // namespace tarn::cli
