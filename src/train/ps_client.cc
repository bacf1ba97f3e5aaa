#include "train/ps_client.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

namespace tarn::train {
namespace {

bool Retryable(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
         IsNotInitialized(s);
}

// Reads a reply of `type`; a kError reply becomes a Status with the server's words.
StatusOr<FrameHeader> ReadReply(Connection& c, MessageType type, const std::string& server) {
  ASSIGN_OR_RETURN(FrameHeader h, c.ReadHeader());
  if (static_cast<MessageType>(h.type) == MessageType::kError) {
    ASSIGN_OR_RETURN(std::string body, c.ReadString(std::min<uint64_t>(h.length, 65536)));
    const auto j = nlohmann::json::parse(body, nullptr, false);
    return FailedPreconditionError(server + ": " + (j.is_object() ? j.value("error", body) : body));
  }
  if (static_cast<MessageType>(h.type) != type) {
    return InvalidArgumentError(server + ": unexpected reply type " + std::to_string(h.type));
  }
  return h;
}

StatusOr<int64_t> ReadStep(Connection& c, const std::string& server) {
  ASSIGN_OR_RETURN(FrameHeader h, ReadReply(c, MessageType::kAck, server));
  if (h.length != 8) return InvalidArgumentError(server + ": bad ack");
  uint64_t step = 0;
  RETURN_IF_ERROR(c.Read(&step, 8));
  return static_cast<int64_t>(step);
}

}  // namespace

bool IsNotInitialized(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition &&
         s.message().find("not initialized") != std::string::npos;
}

PsClient::PsClient(Options options) : options_(std::move(options)) {}

void PsClient::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(Options options) {
  if (options.servers.empty()) return InvalidArgumentError("no parameter servers");
  if (options.plan.servers() != static_cast<int>(options.servers.size())) {
    return InvalidArgumentError("the shard plan is for " + std::to_string(options.plan.servers()) +
                                " servers, not " + std::to_string(options.servers.size()));
  }
  auto client = std::unique_ptr<PsClient>(new PsClient(std::move(options)));
  for (const std::string& address : client->options_.servers) {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      return InvalidArgumentError("parameter server \"" + address + "\": expected HOST:PORT");
    }
    Server s;
    s.host = address.substr(0, colon);
    s.port = std::atoi(address.c_str() + colon + 1);
    if (s.port <= 0 || s.port > 65535) {
      return InvalidArgumentError("parameter server \"" + address + "\": bad port");
    }
    client->servers_.push_back(std::move(s));
  }
  // Each parameter's size is where its last slice ends.
  std::vector<int64_t> sizes;
  for (const auto& list : client->options_.plan.slices) {
    for (const ParamSlice& slice : list) {
      if (sizes.size() <= static_cast<size_t>(slice.param)) sizes.resize(slice.param + 1, 0);
      sizes[slice.param] = std::max(sizes[slice.param], slice.offset + slice.count);
    }
  }
  client->param_offsets_.push_back(0);
  for (int64_t size : sizes) client->param_offsets_.push_back(client->param_offsets_.back() + size);
  for (size_t i = 0; i < client->servers_.size(); ++i) {
    RETURN_IF_ERROR(client->WithRetry(i, [](Server&) { return OkStatus(); }));
  }
  return client;
}

Status PsClient::Dial(Server& s) {
  const std::string where = s.host + ":" + std::to_string(s.port);
  ASSIGN_OR_RETURN(Connection c, Connection::Dial(s.host, s.port, std::chrono::seconds(5)));
  c.SetTimeout(options_.io_timeout);
  if (Status s = AnswerChallenge(c, options_.secret); !s.ok()) {
    return Status(s.code(), where + ": " + s.message());
  }
  const nlohmann::json hello = {{"worker", options_.worker}};
  RETURN_IF_ERROR(c.Send(MessageType::kRegister, next_request_++, hello.dump()));
  ASSIGN_OR_RETURN(FrameHeader h, ReadReply(c, MessageType::kRegistered, where));
  ASSIGN_OR_RETURN(std::string body, c.ReadString(std::min<uint64_t>(h.length, 65536)));
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return InvalidArgumentError(where + ": bad register reply");
  initialized_ = initialized_ && j.value("initialized", false);
  sync_ = j.value("sync", false);
  s.step = j.value("step", int64_t{0});
  s.push_pull = j.value("push_pull", false);
  s.conn = std::make_unique<Connection>(std::move(c));
  return OkStatus();
}

Status PsClient::WithRetry(size_t index, const std::function<Status(Server&)>& op,
                           bool wait_for_init) {
  Server& s = servers_[index];
  const auto deadline = std::chrono::steady_clock::now() + options_.retry_for;
  auto backoff = std::chrono::milliseconds(100);
  Status last;
  while (true) {
    if (s.conn == nullptr) last = Dial(s);
    if (s.conn != nullptr) {
      last = op(s);
      if (last.ok()) return last;
      if (!IsNotInitialized(last)) s.conn.reset();  // the stream may be mid-frame: start over
    }
    if (!Retryable(last) || (IsNotInitialized(last) && !wait_for_init) ||
        std::chrono::steady_clock::now() + backoff > deadline) {
      return last;
    }
    if (IsNotInitialized(last)) {
      // Waiting for the chief: a question on an open connection that the server answers at
      // once, asked every 100 ms, so that a worker starts within 100 ms of the
      // initialisation (with the backoff below it could sleep 5 s through a short run).
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    Log("ps " + std::to_string(index) + " (" + s.host + ":" + std::to_string(s.port) +
        "): " + last.message() + "; retrying in " + std::to_string(backoff.count()) + " ms");
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

Status PsClient::ForEachServer(const std::function<Status(size_t)>& op) {
  std::vector<Status> results(servers_.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < servers_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = op(i); });
  }
  results[0] = op(0);
  for (std::thread& t : threads) t.join();
  for (const Status& s : results) RETURN_IF_ERROR(s);
  return OkStatus();
}

std::vector<iovec> PsClient::Parts(size_t server, const std::vector<float*>& arrays) const {
  std::vector<iovec> parts;
  for (const ParamSlice& slice : options_.plan.slices[server]) {
    parts.push_back({arrays[static_cast<size_t>(slice.param)] + slice.offset,
                     static_cast<size_t>(slice.count) * sizeof(float)});
  }
  return parts;
}

std::vector<float*> PsClient::ParamPointers(const std::vector<float>& flat) const {
  std::vector<float*> out;
  for (size_t i = 0; i + 1 < param_offsets_.size(); ++i) {
    out.push_back(const_cast<float*>(flat.data()) + param_offsets_[i]);
  }
  return out;
}

StatusOr<PsClient::ModelState> PsClient::Snapshot() {
  ModelState state;
  const size_t total = static_cast<size_t>(param_offsets_.back());
  for (size_t i = 0; i < servers_.size(); ++i) {
    RETURN_IF_ERROR(WithRetry(i, [&](Server& s) -> Status {
      RETURN_IF_ERROR(s.conn->Send(MessageType::kSnapshot, next_request_, std::string_view()));
      ASSIGN_OR_RETURN(FrameHeader h, ReadReply(*s.conn, MessageType::kState, s.host));
      uint64_t head[2] = {0, 0};
      RETURN_IF_ERROR(s.conn->Read(head, sizeof head));
      const uint64_t bytes = static_cast<uint64_t>(options_.plan.elements[i]) * 4;
      if (head[1] < 1 || head[1] > 3 || h.length != 16 + head[1] * bytes ||
          (!state.arrays.empty() && state.arrays.size() != head[1])) {
        return InvalidArgumentError(s.host + ": a state of unexpected shape");
      }
      if (state.arrays.empty()) {
        state.arrays.assign(head[1], std::vector<float>(total));
        state.step = static_cast<int64_t>(head[0]);
      }
      std::vector<iovec> parts;
      for (const auto& array : state.arrays) {
        for (const iovec& p : Parts(i, ParamPointers(array))) parts.push_back(p);
      }
      return s.conn->Read(parts);
    }));
  }
  ++next_request_;
  return state;
}

Status PsClient::SetEverywhere(MessageType type, std::vector<uint64_t> head,
                               const std::vector<std::vector<float*>>& arrays) {
  RETURN_IF_ERROR(ForEachServer([&](size_t i) {
    return WithRetry(i, [&](Server& s) -> Status {
      std::vector<iovec> parts = {{head.data(), head.size() * sizeof(uint64_t)}};
      for (const auto& array : arrays) {
        for (const iovec& p : Parts(i, array)) parts.push_back(p);
      }
      RETURN_IF_ERROR(s.conn->Send(type, next_request_, parts));
      ASSIGN_OR_RETURN(s.step, ReadStep(*s.conn, s.host));
      return OkStatus();
    });
  }));
  initialized_ = true;
  return OkStatus();
}

Status PsClient::Restore(const ModelState& state) {
  std::vector<std::vector<float*>> arrays;
  for (const auto& array : state.arrays) {
    if (array.size() != static_cast<size_t>(param_offsets_.back())) {
      return InvalidArgumentError("restore: the state holds " + std::to_string(array.size()) +
                                  " elements per array, the model " +
                                  std::to_string(param_offsets_.back()));
    }
    arrays.push_back(ParamPointers(array));
  }
  return SetEverywhere(MessageType::kRestore,
                       {static_cast<uint64_t>(state.step), state.arrays.size()}, arrays);
}

Status PsClient::Init(const std::vector<float*>& params) {
  return SetEverywhere(MessageType::kInit, {0}, {params});
}

StatusOr<int64_t> PsClient::Pull(const std::vector<float*>& params) {
  RETURN_IF_ERROR(ForEachServer([&](size_t i) {
    return WithRetry(
        i,
        [&](Server& s) -> Status {
          RETURN_IF_ERROR(s.conn->Send(MessageType::kPull, next_request_, std::string_view()));
          return ReadParams(i, params);
        },
        /*wait_for_init=*/!options_.chief);
  }));
  ++next_request_;
  initialized_ = true;
  return servers_[0].step;
}

Status PsClient::SendGradient(size_t i, MessageType type, const std::vector<float*>& gradients) {
  Server& s = servers_[i];
  const uint64_t step = static_cast<uint64_t>(s.pulled);
  std::vector<iovec> parts = {{const_cast<uint64_t*>(&step), 8}};
  for (const iovec& p : Parts(i, gradients)) parts.push_back(p);
  return s.conn->Send(type, next_request_, parts);
}

Status PsClient::ReadParams(size_t i, const std::vector<float*>& params) {
  Server& s = servers_[i];
  ASSIGN_OR_RETURN(FrameHeader h, ReadReply(*s.conn, MessageType::kParams, s.host));
  const uint64_t expected = 8 + static_cast<uint64_t>(options_.plan.elements[i]) * 4;
  if (h.length != expected) {
    return InvalidArgumentError(s.host + ": sent " + std::to_string(h.length) +
                                " bytes of parameters, expected " + std::to_string(expected) +
                                " (a different model or ps count?)");
  }
  uint64_t step = 0;
  std::vector<iovec> parts = {{&step, 8}};
  for (const iovec& p : Parts(i, params)) parts.push_back(p);
  RETURN_IF_ERROR(s.conn->Read(parts));
  s.step = s.pulled = static_cast<int64_t>(step);
  return OkStatus();
}

StatusOr<int64_t> PsClient::PushPull(const std::vector<float*>& gradients,
                                     const std::vector<float*>& params) {
  if (!std::all_of(servers_.begin(), servers_.end(), [](const Server& s) { return s.push_pull; })) {
    RETURN_IF_ERROR(Push(gradients).status());
    return Pull(params);
  }
  RETURN_IF_ERROR(ForEachServer([&](size_t i) {
    return WithRetry(i, [&](Server&) -> Status {
      RETURN_IF_ERROR(SendGradient(i, MessageType::kPushPull, gradients));
      return ReadParams(i, params);
    });
  }));
  ++next_request_;
  initialized_ = true;
  return servers_[0].step;
}

StatusOr<int64_t> PsClient::Push(const std::vector<float*>& gradients) {
  RETURN_IF_ERROR(ForEachServer([&](size_t i) {
    return WithRetry(i, [&](Server& s) -> Status {
      RETURN_IF_ERROR(SendGradient(i, MessageType::kPush, gradients));
      ASSIGN_OR_RETURN(s.step, ReadStep(*s.conn, s.host));
      return OkStatus();
    });
  }));
  ++next_request_;
  return servers_[0].step;
}

}  // namespace tarn::train
