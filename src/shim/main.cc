// tarn-shim SHIM_DIR READY_FD: see shim.h.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shim/shim.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tarn-shim SHIM_DIR READY_FD (started by tarn server)\n");
    return 2;
  }
  return tarn::shim::RunShim(argv[1], std::atoi(argv[2]));
}
