#include "train/parameter_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "train/ps_wire.h"

namespace tarn::train {

struct ParameterServer::Worker {
  explicit Worker(Connection c) : conn(std::move(c)) {}
  Connection conn;
  int64_t index = -1;  // -1 until it registers
  std::vector<float> buffer;
};

namespace {

Status SendError(Connection& c, uint64_t request, const std::string& why) {
  return c.Send(MessageType::kError, request, nlohmann::json{{"error", why}}.dump());
}

Status SendStep(Connection& c, uint64_t request, int64_t step) {
  const uint64_t s = static_cast<uint64_t>(step);
  iovec part{const_cast<uint64_t*>(&s), sizeof s};
  return c.Send(MessageType::kAck, request, std::span<const iovec>(&part, 1));
}

}  // namespace

StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(Options options) {
  if (options.elements <= 0) return InvalidArgumentError("parameter server: no parameters");
  if (options.backup_workers < 0) {
    return InvalidArgumentError("parameter server: backup_workers must be >= 0");
  }
  ASSIGN_OR_RETURN(FlatOptimizer optimizer,
                   FlatOptimizer::Create(options.optimizer, static_cast<size_t>(options.elements)));
  return std::unique_ptr<ParameterServer>(
      new ParameterServer(std::move(options), std::move(optimizer)));
}

ParameterServer::ParameterServer(Options options, FlatOptimizer optimizer)
    : options_(std::move(options)),
      params_(static_cast<size_t>(options_.elements), 0.0f),
      optimizer_(std::move(optimizer)) {}

ParameterServer::~ParameterServer() { Stop(); }

void ParameterServer::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

Status ParameterServer::Start() {
  ASSIGN_OR_RETURN(listen_fd_, Listen(options_.host, options_.port, &port_));
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return OkStatus();
}

void ParameterServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  std::unordered_map<uint64_t, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : connections_) ::shutdown(w->conn.fd(), SHUT_RDWR);
    threads.swap(threads_);
    finished_.clear();
  }
  step_done_.notify_all();
  for (auto& [serial, t] : threads) t.join();
}

ParameterServer::Stats ParameterServer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.step = step_;
  s.workers = static_cast<int>(members_.size());
  s.initialized = initialized_;
  s.pushes = pushes_;
  s.stale_pushes = stale_pushes_;
  s.pulls = pulls_;
  s.connection_threads = static_cast<int>(threads_.size());
  return s;
}

void ParameterServer::AcceptLoop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!stopping_) Log(std::string("accept: ") + std::strerror(errno));
      return;
    }
    TuneSocket(fd);
    auto worker = std::make_shared<Worker>(Connection(fd));
    std::vector<std::thread> ended;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;  // the Connection closes the socket
      for (uint64_t serial : finished_) {
        auto it = threads_.find(serial);
        ended.push_back(std::move(it->second));
        threads_.erase(it);
      }
      finished_.clear();
      connections_.push_back(worker);
      const uint64_t serial = next_thread_++;
      threads_.emplace(serial, std::thread([this, worker, serial] { Serve(worker, serial); }));
    }
    for (std::thread& t : ended) t.join();  // they are past their last use of mu_
  }
}

void ParameterServer::Serve(std::shared_ptr<Worker> w, uint64_t serial) {
  // Admission first: only a process that holds the assembly's secret talks to this server.
  w->conn.SetTimeout(std::chrono::seconds(10));  // a silent peer does not hold a thread
  const Status admitted = OfferChallenge(w->conn, options_.secret);
  w->conn.SetTimeout(std::chrono::milliseconds(0));
  if (!admitted.ok() && !stopping_) {
    Log("refused a connection from " + PeerAddress(w->conn.fd()) + ": " + admitted.message());
    // Its words for the other end (best effort: it may not be listening).
    w->conn.SetTimeout(std::chrono::seconds(1));
    if (SendError(w->conn, 0, "refused: " + admitted.message()).ok()) {
      // Closing with its next frame unread would reset the connection, and the reset could
      // overtake the error: end our side, and let it read and close first.
      ::shutdown(w->conn.fd(), SHUT_WR);
      char drain[4096];
      while (::recv(w->conn.fd(), drain, sizeof drain, 0) > 0) {
      }
    }
  }
  while (admitted.ok() && !stopping_) {
    StatusOr<FrameHeader> h = w->conn.ReadHeader();
    Status s = h.ok() ? Handle(*w, *h) : h.status();
    if (!s.ok()) {
      if (!stopping_ && w->index >= 0) {
        Log("worker " + std::to_string(w->index) + ": " + s.message());
      }
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (w->index >= 0) {
    auto it = members_.find(w->index);
    if (it != members_.end() && --it->second == 0) {
      members_.erase(it);
      Log("worker " + std::to_string(w->index) + " left; " + std::to_string(members_.size()) +
          " remain");
      if (options_.sync) MaybeFinishStepLocked();
    }
  }
  std::erase(connections_, w);
  w->conn.Close();
  finished_.push_back(serial);
}

Status ParameterServer::Handle(Worker& w, const FrameHeader& h) {
  const auto type = static_cast<MessageType>(h.type);
  const uint64_t expected = 8 + static_cast<uint64_t>(options_.elements) * 4;
  switch (type) {
    case MessageType::kRegister: {
      if (h.length > 4096) return InvalidArgumentError("register: body too big");
      ASSIGN_OR_RETURN(std::string body, w.conn.ReadString(h.length));
      const auto j = nlohmann::json::parse(body, nullptr, false);
      if (!j.is_object() || !j.contains("worker") || !j["worker"].is_number_integer() ||
          j["worker"].get<int64_t>() < 0) {
        return SendError(w.conn, h.request, "register: expected {\"worker\": index}");
      }
      nlohmann::json reply;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (w.index < 0) {
          w.index = j["worker"].get<int64_t>();
          if (members_[w.index]++ == 0) {
            Log("worker " + std::to_string(w.index) + " joined; " +
                std::to_string(members_.size()) + " members");
          }
        }
        reply = {{"initialized", initialized_},
                 {"step", step_},
                 {"workers", members_.size()},
                 {"sync", options_.sync},
                 {"push_pull", true}};
      }
      return w.conn.Send(MessageType::kRegistered, h.request, reply.dump());
    }
    case MessageType::kInit: {
      if (h.length != expected) {
        RETURN_IF_ERROR(w.conn.Skip(h.length));
        return SendError(w.conn, h.request,
                         "init: " + std::to_string(h.length) + " bytes, expected " +
                             std::to_string(expected) + " (a different model or ps count?)");
      }
      uint64_t ignored = 0;
      w.buffer.resize(static_cast<size_t>(options_.elements));
      iovec parts[2] = {{&ignored, 8}, {w.buffer.data(), w.buffer.size() * 4}};
      RETURN_IF_ERROR(w.conn.Read(parts));
      int64_t step = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!initialized_) {
          std::unique_lock<std::shared_mutex> params(params_mu_);
          params_.swap(w.buffer);
          initialized_ = true;
          Log("initialised by worker " + std::to_string(w.index));
        }
        step = step_;
      }
      return SendStep(w.conn, h.request, step);
    }
    case MessageType::kPull: {
      RETURN_IF_ERROR(w.conn.Skip(h.length));
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++pulls_;
        if (!initialized_) {
          return SendError(w.conn, h.request, "not initialized: waiting for the chief");
        }
      }
      return SendParams(w, h.request);
    }
    case MessageType::kSnapshot: {
      RETURN_IF_ERROR(w.conn.Skip(h.length));
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!initialized_) {
          return SendError(w.conn, h.request, "not initialized: nothing to snapshot");
        }
      }
      std::shared_lock<std::shared_mutex> params(params_mu_);
      const uint64_t head[2] = {static_cast<uint64_t>(optimizer_.steps()),
                                static_cast<uint64_t>(1 + optimizer_.moment_arrays())};
      const size_t bytes = params_.size() * 4;
      std::vector<iovec> parts = {{const_cast<uint64_t*>(head), sizeof head},
                                  {params_.data(), bytes}};
      for (int i = 0; i < optimizer_.moment_arrays(); ++i) {
        parts.push_back({optimizer_.moment(i), bytes});
      }
      return w.conn.Send(MessageType::kState, h.request, parts);
    }
    case MessageType::kRestore: {
      const uint64_t arrays = 1 + static_cast<uint64_t>(optimizer_.moment_arrays());
      const uint64_t bytes = static_cast<uint64_t>(options_.elements) * 4;
      if (h.length != 16 + arrays * bytes) {
        RETURN_IF_ERROR(w.conn.Skip(h.length));
        return SendError(w.conn, h.request,
                         "restore: " + std::to_string(h.length) + " bytes, expected " +
                             std::to_string(16 + arrays * bytes) +
                             " (a different model, ps count or optimizer?)");
      }
      uint64_t head[2] = {0, 0};
      std::vector<std::vector<float>> state(
          arrays, std::vector<float>(static_cast<size_t>(options_.elements)));
      std::vector<iovec> parts = {{head, sizeof head}};
      for (auto& a : state) parts.push_back({a.data(), a.size() * 4});
      RETURN_IF_ERROR(w.conn.Read(parts));
      if (head[1] != arrays) return SendError(w.conn, h.request, "restore: wrong array count");
      int64_t step = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!initialized_) {
          std::unique_lock<std::shared_mutex> params(params_mu_);
          params_.swap(state[0]);
          for (int i = 0; i < optimizer_.moment_arrays(); ++i) {
            std::copy(state[static_cast<size_t>(i) + 1].begin(),
                      state[static_cast<size_t>(i) + 1].end(), optimizer_.moment(i));
          }
          optimizer_.set_steps(static_cast<int64_t>(head[0]));
          step_ = static_cast<int64_t>(head[0]);
          initialized_ = true;
          Log("restored step " + std::to_string(step_) + " from worker " + std::to_string(w.index));
        }
        step = step_;
      }
      return SendStep(w.conn, h.request, step);
    }
    case MessageType::kPush:
    case MessageType::kPushPull:
      if (h.length != expected) {
        RETURN_IF_ERROR(w.conn.Skip(h.length));
        return SendError(
            w.conn, h.request,
            "push: " + std::to_string(h.length) + " bytes, expected " + std::to_string(expected));
      }
      return HandlePush(w, h.request, type == MessageType::kPushPull);
    default:
      RETURN_IF_ERROR(w.conn.Skip(h.length));
      return SendError(w.conn, h.request, "unknown message type " + std::to_string(h.type));
  }
}

Status ParameterServer::SendParams(Worker& w, uint64_t request) {
  std::shared_lock<std::shared_mutex> params(params_mu_);
  const uint64_t step = static_cast<uint64_t>(optimizer_.steps());
  iovec parts[2] = {{const_cast<uint64_t*>(&step), 8}, {params_.data(), params_.size() * 4}};
  return w.conn.Send(MessageType::kParams, request, parts);
}

Status ParameterServer::HandlePush(Worker& w, uint64_t request, bool answer_params) {
  uint64_t computed_at = 0;
  w.buffer.resize(static_cast<size_t>(options_.elements));
  iovec parts[2] = {{&computed_at, 8}, {w.buffer.data(), w.buffer.size() * 4}};
  RETURN_IF_ERROR(w.conn.Read(parts));
  std::unique_lock<std::mutex> lock(mu_);
  if (w.index < 0) return SendError(w.conn, request, "push before register");
  if (!initialized_) return SendError(w.conn, request, "not initialized: waiting for the chief");
  ++pushes_;
  if (answer_params) ++pulls_;
  // The answer (sent with mu_ released): the step, or (kPushPull) what a pull right after
  // would have returned.
  auto answer = [&](int64_t step) {
    return answer_params ? SendParams(w, request) : SendStep(w.conn, request, step);
  };
  if (!options_.sync) {
    {
      std::unique_lock<std::shared_mutex> params(params_mu_);
      optimizer_.Apply(params_.data(), w.buffer.data());
    }
    const int64_t step = ++step_;
    lock.unlock();
    return answer(step);
  }
  if (static_cast<int64_t>(computed_at) != step_) {
    ++stale_pushes_;
    const int64_t step = step_;
    lock.unlock();
    return answer(step);
  }
  if (sum_.empty()) sum_.assign(params_.size(), 0.0f);
  for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += w.buffer[i];
  ++summed_;
  MaybeFinishStepLocked();
  step_done_.wait(lock, [&] { return step_ > static_cast<int64_t>(computed_at) || stopping_; });
  const int64_t step = step_;
  lock.unlock();
  return answer(step);
}

void ParameterServer::MaybeFinishStepLocked() {
  const int members = static_cast<int>(members_.size());
  const int required = std::max(1, members - options_.backup_workers);
  if (summed_ == 0 || summed_ < required) return;
  const float scale = 1.0f / static_cast<float>(summed_);
  for (float& g : sum_) g *= scale;
  {
    std::unique_lock<std::shared_mutex> params(params_mu_);
    optimizer_.Apply(params_.data(), sum_.data());
  }
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  summed_ = 0;
  ++step_;
  step_done_.notify_all();
}

}  // namespace tarn::train
