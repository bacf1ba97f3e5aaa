// http_load: bench/run api's own HTTP/1.1 load generator, for what wrk cannot reach: a Unix
// socket (tarn server's local listener). It speaks to TCP too, so that the socket and TCP are
// measured by the same client in the same run. Closed loop like wrk: each of --connections
// keep-alive connections has one request outstanding; --threads threads each drive their
// share (write the next request on every connection, then read every answer).
//
// usage: http_load (--unix PATH | --tcp HOST:PORT) --path /x [--header "K: V"]...
//                  [--connections 64] [--threads 2] [--duration 10] [--warmup 2]
// Prints one JSON object: rps, latency_p50_ms, latency_p99_ms, requests, errors, non_2xx.
// Exits 1 when an answer is not 2xx or a connection fails: a figure of errors is no figure.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "http_wire.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string unix_path, host;
  int port = 0;
  std::string path = "/";
  std::vector<std::string> headers;
  int connections = 64, threads = 2;
  double duration_s = 10, warmup_s = 2;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "http_load: %s\nusage: http_load (--unix PATH | --tcp HOST:PORT) --path /x "
               "[--header 'K: V']... [--connections N] [--threads N] [--duration S] "
               "[--warmup S]\n",
               why.c_str());
  std::exit(2);
}

Flags Parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--unix") {
      f.unix_path = v;
    } else if (a == "--tcp") {
      const size_t colon = v.rfind(':');
      if (colon == std::string::npos) Usage("--tcp: expected HOST:PORT, got " + v);
      f.host = v.substr(0, colon);
      f.port = std::atoi(v.c_str() + colon + 1);
    } else if (a == "--path") {
      f.path = v;
    } else if (a == "--header") {
      f.headers.push_back(v);
    } else if (a == "--connections") {
      f.connections = std::atoi(v.c_str());
    } else if (a == "--threads") {
      f.threads = std::atoi(v.c_str());
    } else if (a == "--duration") {
      f.duration_s = std::atof(v.c_str());
    } else if (a == "--warmup") {
      f.warmup_s = std::atof(v.c_str());
    } else {
      Usage("unknown flag " + a);
    }
  }
  if (f.unix_path.empty() == f.host.empty()) Usage("give one of --unix and --tcp");
  if (f.connections < 1 || f.threads < 1 || f.threads > f.connections) {
    Usage("--connections and --threads must be positive, threads <= connections");
  }
  return f;
}

int Connect(const Flags& f) {
  return f.unix_path.empty() ? tarn::bench::ConnectTcp(f.host, f.port)
                             : tarn::bench::ConnectUnix(f.unix_path);
}

struct Conn {
  int fd = -1;
  std::string in;  // bytes read past the last answer
  Clock::time_point sent;
};

struct Tally {
  std::vector<double> latencies_ms;
  long requests = 0, errors = 0, non_2xx = 0;
};

// Drives `conns` until `until`; counts only what completes after `from`.
void Drive(std::vector<Conn>& conns, const std::string& request, Clock::time_point from,
           Clock::time_point until, Tally* t) {
  while (Clock::now() < until) {
    for (Conn& c : conns) {
      c.sent = Clock::now();
      if (!tarn::bench::WriteAll(c.fd, request)) ++t->errors;
    }
    for (Conn& c : conns) {
      const int status = tarn::bench::ReadAnswer(c.fd, c.in);
      const Clock::time_point done = Clock::now();
      if (done < from) continue;
      if (status < 0) {
        ++t->errors;
        continue;
      }
      ++t->requests;
      if (status < 200 || status > 299) ++t->non_2xx;
      t->latencies_ms.push_back(std::chrono::duration<double, std::milli>(done - c.sent).count());
    }
    if (t->errors > 0) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = Parse(argc, argv);
  std::string request = "GET " + f.path + " HTTP/1.1\r\nHost: " +
                        (f.unix_path.empty() ? f.host : std::string("localhost")) + "\r\n";
  for (const std::string& h : f.headers) request += h + "\r\n";
  request += "\r\n";

  std::vector<std::vector<Conn>> shares(static_cast<size_t>(f.threads));
  for (int i = 0; i < f.connections; ++i) {
    Conn c;
    c.fd = Connect(f);
    if (c.fd < 0) {
      std::fprintf(stderr, "http_load: cannot connect: %s\n", std::strerror(errno));
      return 1;
    }
    shares[static_cast<size_t>(i % f.threads)].push_back(std::move(c));
  }
  const Clock::time_point start = Clock::now();
  const Clock::time_point from =
      start + std::chrono::microseconds(static_cast<int64_t>(f.warmup_s * 1e6));
  const Clock::time_point until =
      from + std::chrono::microseconds(static_cast<int64_t>(f.duration_s * 1e6));
  std::vector<Tally> tallies(shares.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < shares.size(); ++i) {
    threads.emplace_back([&, i] { Drive(shares[i], request, from, until, &tallies[i]); });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - from).count();

  Tally all;
  for (Tally& t : tallies) {
    all.requests += t.requests;
    all.errors += t.errors;
    all.non_2xx += t.non_2xx;
    all.latencies_ms.insert(all.latencies_ms.end(), t.latencies_ms.begin(), t.latencies_ms.end());
  }
  std::sort(all.latencies_ms.begin(), all.latencies_ms.end());
  auto pct = [&all](double p) {
    if (all.latencies_ms.empty()) return 0.0;
    const size_t i = std::min(all.latencies_ms.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(all.latencies_ms.size())));
    return all.latencies_ms[i];
  };
  std::printf(
      "{\"rps\": %.1f, \"latency_p50_ms\": %.3f, \"latency_p99_ms\": %.3f, \"requests\": %ld, "
      "\"errors\": %ld, \"non_2xx\": %ld}\n",
      static_cast<double>(all.requests) / seconds, pct(0.50), pct(0.99), all.requests, all.errors,
      all.non_2xx);
  for (auto& share : shares) {
    for (Conn& c : share) ::close(c.fd);
  }
  return all.errors == 0 && all.non_2xx == 0 ? 0 : 1;
}
