// tarn-shim SHIM_DIR READY_FD, tarn-shim --foreground SHIM_DIR [--env NAME=VALUE]..., or
// tarn-shim --fork-server FD: see shim.h.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shim/shim.h"

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--foreground") {
    std::vector<std::string> env;
    for (int i = 3; i < argc; i += 2) {
      if (std::string(argv[i]) != "--env" || i + 1 >= argc ||
          std::string(argv[i + 1]).find('=') == std::string::npos) {
        std::fprintf(stderr, "tarn-shim: --foreground SHIM_DIR [--env NAME=VALUE]...: bad \"%s\"\n",
                     argv[i]);
        return 2;
      }
      env.push_back(argv[i + 1]);
    }
    return tarn::shim::RunShimForeground(argv[2], env);
  }
  if (argc == 3 && std::string(argv[1]) == "--fork-server") {
    return tarn::shim::RunForkServer(std::atoi(argv[2]));
  }
  if (argc != 3 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: tarn-shim SHIM_DIR READY_FD | tarn-shim --foreground SHIM_DIR [--env "
                 "NAME=VALUE]... (started by tarn server)\n");
    return 2;
  }
  return tarn::shim::RunShim(argv[1], std::atoi(argv[2]));
}
