// bench/run ps: push+pull throughput of tarn-train's parameter-server protocol against raw
// TCP on loopback, in the same run, for 4 MiB and 900 KB (the CNN's 225,034 floats)
// messages. Both move the same bytes per round: N up, N down.
//
//   raw TCP: a client writes N bytes, the server reads them and writes N bytes back.
//   tarn:    a PsClient pushes N bytes of gradients (the server applies SGD with momentum
//            to them) and pulls N bytes of parameters, through a ParameterServer.
//
// Rounds alternate between the two (3 each per size, ~1.5 s each); medians are reported.
// Prints one flat JSON object.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "train/parameter_server.h"
#include "train/ps_client.h"
#include "train/ps_wire.h"

namespace {

using Clock = std::chrono::steady_clock;
using tarn::train::Connection;

constexpr double kRoundSeconds = 1.5;

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Bytes per second moved by the raw TCP ping-pong of `n`-byte messages.
double RawTcp(size_t n) {
  int port = 0;
  auto listener = tarn::train::Listen("127.0.0.1", 0, &port);
  if (!listener.ok()) std::abort();
  std::thread server([&] {
    const int fd = ::accept(*listener, nullptr, nullptr);
    tarn::train::TuneSocket(fd);
    std::vector<char> buffer(n);
    while (ReadAll(fd, buffer.data(), n) && WriteAll(fd, buffer.data(), n)) {
    }
    ::close(fd);
  });
  auto c = Connection::Dial("127.0.0.1", port, std::chrono::seconds(5));
  if (!c.ok()) std::abort();
  std::vector<char> out(n, 1), in(n);
  int64_t rounds = 0;
  const auto start = Clock::now();
  double seconds = 0;
  do {
    if (!WriteAll(c->fd(), out.data(), n) || !ReadAll(c->fd(), in.data(), n)) std::abort();
    ++rounds;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (seconds < kRoundSeconds);
  c->Close();
  server.join();
  ::close(*listener);
  return 2.0 * static_cast<double>(n) * static_cast<double>(rounds) / seconds;
}

// Bytes per second moved by push + pull of `n` bytes of floats.
double PushPull(size_t n) {
  const int64_t floats = static_cast<int64_t>(n / 4);
  tarn::train::ParameterServer::Options so;
  so.host = "127.0.0.1";
  so.elements = floats;
  so.optimizer.kind = "sgd";
  so.optimizer.learning_rate = 1e-3;
  auto server = tarn::train::ParameterServer::Create(so);
  if (!server.ok() || !(*server)->Start().ok()) std::abort();
  tarn::train::PsClient::Options co;
  co.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  co.plan = tarn::train::PlanShards({floats}, 1);
  auto client = tarn::train::PsClient::Connect(co);
  if (!client.ok()) std::abort();
  std::vector<float> params(static_cast<size_t>(floats), 0.5f), grads(params.size(), 0.01f);
  std::vector<float*> p = {params.data()}, g = {grads.data()};
  if (!(*client)->Init(p).ok()) std::abort();
  int64_t rounds = 0;
  const auto start = Clock::now();
  double seconds = 0;
  do {
    if (!(*client)->Push(g).ok() || !(*client)->Pull(p).ok()) std::abort();
    ++rounds;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (seconds < kRoundSeconds);
  client->reset();
  (*server)->Stop();
  return 2.0 * static_cast<double>(floats * 4) * static_cast<double>(rounds) / seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  struct Size {
    const char* name;
    size_t bytes;
  };
  const Size sizes[] = {{"4mib", size_t{4} << 20}, {"900kb", 225034 * 4}};
  std::printf("{\n");
  bool first = true;
  for (const Size& s : sizes) {
    std::vector<double> raw, tarn;
    for (int round = 0; round < 3; ++round) {
      raw.push_back(RawTcp(s.bytes));
      tarn.push_back(PushPull(s.bytes));
    }
    const double r = Median(raw), t = Median(tarn);
    std::printf("%s  \"raw_tcp_gbytes_per_s_%s\": %.3f,\n", first ? "" : ",\n", s.name, r / 1e9);
    std::printf("  \"tarn_push_pull_gbytes_per_s_%s\": %.3f,\n", s.name, t / 1e9);
    std::printf("  \"tarn_runs_%s\": [%.3f, %.3f, %.3f],\n", s.name, tarn[0] / 1e9, tarn[1] / 1e9,
                tarn[2] / 1e9);
    std::printf("  \"raw_runs_%s\": [%.3f, %.3f, %.3f],\n", s.name, raw[0] / 1e9, raw[1] / 1e9,
                raw[2] / 1e9);
    std::printf("  \"ratio_%s\": %.3f", s.name, t / r);
    first = false;
  }
  std::printf(",\n  \"message_bytes_4mib\": %zu,\n  \"message_bytes_900kb\": %zu\n}\n",
              sizes[0].bytes, sizes[1].bytes);
  return 0;
}
