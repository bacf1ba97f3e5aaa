#include "metrics/collector.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <set>

namespace tarn::metrics {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

int MetricsPort(const std::map<std::string, int>& ports) {
  for (const char* name : {"metrics", "http"}) {
    auto it = ports.find(name);
    if (it != ports.end() && it->second > 0 && it->second < 65536) return it->second;
  }
  return 0;
}

StatusOr<std::string> HttpGet(const std::string& ip, int port, std::chrono::milliseconds timeout,
                              size_t max_bytes) {
  const std::string where = "GET http://" + ip + ":" + std::to_string(port) + kMetricsPath;
  try {
    asio::io_context io;
    beast::error_code ec;
    const asio::ip::address address = asio::ip::make_address(ip, ec);
    if (ec) return InvalidArgumentError(where + ": \"" + ip + "\" is not an IP address");
    beast::tcp_stream stream(io);
    http::request<http::empty_body> req{http::verb::get, kMetricsPath, 11};
    req.set(http::field::host, ip + ":" + std::to_string(port));
    req.set(http::field::user_agent, "tarn-collector");
    req.set(http::field::accept, "text/plain;version=0.0.4");
    req.keep_alive(false);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_bytes);
    parser.header_limit(16 * 1024);
    // One deadline for the whole exchange: tcp_stream's timer bounds asynchronous operations
    // only, so connect, write and read are asynchronous, run here to their end.
    stream.expires_after(timeout);
    stream.async_connect(
        asio::ip::tcp::endpoint(address, static_cast<uint16_t>(port)), [&](beast::error_code e) {
          if (e) {
            ec = e;
            return;
          }
          http::async_write(stream, req, [&](beast::error_code e, size_t) {
            if (e) {
              ec = e;
              return;
            }
            // The head first: Beast 1.74 skips body_limit for a Content-Length that arrives
            // with the head in one read, so the length is checked here.
            http::async_read_header(stream, buffer, parser, [&](beast::error_code e, size_t) {
              if (!e && parser.content_length() && *parser.content_length() > max_bytes) {
                e = http::error::body_limit;
              }
              if (e) {
                ec = e;
                return;
              }
              http::async_read(stream, buffer, parser,
                               [&](beast::error_code e, size_t) { ec = e; });
            });
          });
        });
    io.run();
    if (ec == http::error::body_limit) {
      return ResourceExhaustedError(where + ": the answer is over " + std::to_string(max_bytes) +
                                    " bytes");
    }
    if (ec == beast::error::timeout) {
      return DeadlineExceededError(where + ": no whole answer within " +
                                   std::to_string(timeout.count()) + " ms");
    }
    if (ec) return UnavailableError(where + ": " + ec.message());
    const auto& res = parser.get();
    if (res.body().size() > max_bytes) {
      return ResourceExhaustedError(where + ": the answer is over " + std::to_string(max_bytes) +
                                    " bytes");
    }
    if (res.result_int() != 200) {
      return UnavailableError(where + " answered " + std::to_string(res.result_int()));
    }
    return res.body();
  } catch (const std::exception& e) {  // Asio's allocations and resolver, at the edge
    return InternalError(where + ": " + e.what());
  }
}

Collector::Collector(Options options) : options_(std::move(options)), store_(options_.store) {}

Collector::~Collector() { Stop(); }

void Collector::Start() {
  if (options_.interval.count() <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      RunOnce();
      lock.lock();
      wake_.wait_for(lock, options_.interval, [this] { return stop_; });
    }
  });
}

void Collector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Collector::ScrapeOne(const Target& t) {
  const std::string endpoint =
      "http://" + t.ip + ":" + std::to_string(t.port) + kMetricsPath;
  StatusOr<std::string> body =
      options_.fetch ? options_.fetch(t.ip, t.port, options_.timeout, options_.max_body_bytes)
                     : HttpGet(t.ip, t.port, options_.timeout, options_.max_body_bytes);
  const int64_t now = options_.clock->WallMillis();
  std::string error;
  if (body.ok()) {
    StatusOr<Exposition> e = ParsePrometheusText(*body, options_.max_samples);
    if (e.ok()) {
      store_.Record(t.key, now, *e);
    } else {
      error = endpoint + ": not the Prometheus text format: " + e.status().message();
    }
  } else {
    error = body.status().message();
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++scrapes_;
  if (!error.empty()) ++failures_;
  states_[t.key] = ScrapeState{endpoint, now, std::move(error)};
}

void Collector::RunOnce() {
  const std::vector<Target> all = options_.targets ? options_.targets() : std::vector<Target>{};
  std::set<std::string> known;
  std::vector<const Target*> due;
  for (const Target& t : all) {
    known.insert(t.key);
    if (!t.ip.empty() && t.port > 0) due.push_back(&t);
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < due.size();) ScrapeOne(*due[i]);
  };
  const size_t helpers =
      std::min<size_t>(due.size(), static_cast<size_t>(std::max(options_.parallel, 1))) ;
  std::vector<std::thread> threads;
  for (size_t i = 1; i < helpers; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  store_.Retain([&](const std::string& key) { return known.count(key) > 0; });
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = states_.begin(); it != states_.end();) {
    it = known.count(it->first) ? std::next(it) : states_.erase(it);
  }
}

std::optional<ScrapeState> Collector::State(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(key);
  if (it == states_.end()) return std::nullopt;
  return it->second;
}

uint64_t Collector::scrapes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return scrapes_;
}

uint64_t Collector::failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

}  // namespace tarn::metrics
