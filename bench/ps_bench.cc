// bench/run ps: push+pull throughput of tarn-train's parameter-server protocol against raw
// TCP and against gRPC on loopback, in the same run, for 4 MiB and 900 KB (the CNN's 225,034
// floats) messages. All three move the same bytes per round: N up, N down.
//
//   raw TCP: a client writes N bytes, the server reads them and writes N bytes back.
//   tarn:    a PsClient pushes N bytes of gradients (the server applies SGD with momentum
//            to them) and pulls N bytes of parameters, through a ParameterServer.
//   gRPC:    Debian's libgrpc++ 1.51 as a performance-minded user would drive it (see
//            GrpcPeer below): the generic API with grpc::ByteBuffer, no protobuf, one
//            channel, one bidi stream with one request and one reply message per round,
//            both sides on completion queues. The sent ByteBuffers point at the caller's
//            memory (no copy); each side copies what it receives into one contiguous
//            buffer (one copy: a ps needs the gradient in its own memory, as tarn reads it
//            with readv into tensor memory). The gRPC server does no optimizer step, so
//            it is, like raw TCP, favored against tarn. Run with --grpc-unary to measure
//            one unary call per round instead: measured alternating with the stream in one
//            run, it moved 5% less at 4 MiB and 8% less at 900 KB, so the stream is the peer.
//
// Rounds alternate between the three (3 each per size, ~1.5 s each); medians are reported.
// Prints one flat JSON object; the ratios are tarn or gRPC against raw TCP, and tarn
// against gRPC.
#include <arpa/inet.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
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

// TARN_ASSEMBLY_SECRET's shape: 64 hex digits.
constexpr char kSecret[] = "4c9a3e0f5d1b7a2c8e6f0a4b9d3c7e1f2a5b8c0d4e6f8a1b3c5d7e9f0a2b4c6d";

// Seconds per connection (connect, the challenge when `secret`, registration), over many.
double ConnectSeconds(bool secret) {
  tarn::train::ParameterServer::Options so;
  so.host = "127.0.0.1";
  so.elements = 1;
  if (secret) so.secret = kSecret;
  auto server = tarn::train::ParameterServer::Create(so);
  if (!server.ok() || !(*server)->Start().ok()) std::abort();
  tarn::train::PsClient::Options co;
  co.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  co.plan = tarn::train::PlanShards({1}, 1);
  if (secret) co.secret = kSecret;
  constexpr int kConnections = 300;
  const auto start = Clock::now();
  for (int i = 0; i < kConnections; ++i) {
    if (!tarn::train::PsClient::Connect(co).ok()) std::abort();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  (*server)->Stop();
  return seconds / kConnections;
}

// Bytes per second moved by push + pull of `n` bytes of floats.
double PushPull(size_t n) {
  const int64_t floats = static_cast<int64_t>(n / 4);
  tarn::train::ParameterServer::Options so;
  so.host = "127.0.0.1";
  so.elements = floats;
  so.optimizer.kind = "sgd";
  so.optimizer.learning_rate = 1e-3;
  so.secret = kSecret;  // as under tarn: every connection answers the challenge
  auto server = tarn::train::ParameterServer::Create(so);
  if (!server.ok() || !(*server)->Start().ok()) std::abort();
  tarn::train::PsClient::Options co;
  co.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  co.plan = tarn::train::PlanShards({floats}, 1);
  co.secret = kSecret;
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

// The gRPC peer's tuning, the same on both ends: no message size limits; retries off (a
// retrying channel keeps each sent message for a possible replay, a ps would not retry a
// push blindly); the minimal filter stack. Every other HTTP/2 knob stays at its default,
// BDP probing included: on this machine (2 cores, shared) a 8 MiB lookahead window, 16 MiB
// frames and 1-8 MiB TCP read chunks gained nothing beyond the noise, and BDP probing off
// gained about a fifth at 4 MiB but lost a quarter at 900 KB.
void TuneGrpc(grpc::ChannelArguments* args) {
  args->SetMaxReceiveMessageSize(-1);
  args->SetMaxSendMessageSize(-1);
  args->SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args->SetInt(GRPC_ARG_MINIMAL_STACK, 1);
}

constexpr char kUnaryMethod[] = "/tarn.bench.Ps/PushPull";
constexpr char kStreamMethod[] = "/tarn.bench.Ps/PushPullStream";

// A message that points at `n` bytes of the caller's memory without copying them; the
// memory must outlive every send of it.
grpc::ByteBuffer Borrow(const char* p, size_t n) {
  grpc::Slice slice(p, n, grpc::Slice::STATIC_SLICE);
  return grpc::ByteBuffer(&slice, 1);
}

// The one copy a receiver makes: gRPC's slices (as the transport read them) into the
// contiguous buffer where the ps keeps its tensor. Dump references the slices, it does not
// copy them.
void CopyOut(const grpc::ByteBuffer& message, char* to, size_t n) {
  std::vector<grpc::Slice> slices;
  if (message.Length() != n || !message.Dump(&slices).ok()) std::abort();
  for (const grpc::Slice& s : slices) {
    std::memcpy(to, s.begin(), s.size());
    to += s.size();
  }
}

// The gRPC parameter-server stand-in: an AsyncGenericService on one completion-queue thread
// that answers each request message of n bytes with n bytes of "parameters". kUnaryMethod
// calls carry one request and get one reply; kStreamMethod streams carry one request/reply
// pair per round until the client half-closes. Construct, use port(), destroy; the
// destructor shuts the server down.
class GrpcPeer {
 public:
  explicit GrpcPeer(size_t n) : n_(n), gradient_(n), params_(n, 2) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterAsyncGenericService(&service_);
    builder.SetMaxReceiveMessageSize(-1);
    builder.SetMaxSendMessageSize(-1);
    builder.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
    cq_ = builder.AddCompletionQueue();
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) std::abort();
    reply_ = Borrow(params_.data(), n_);
    Accept();
    thread_ = std::thread([this] { Serve(); });
  }
  ~GrpcPeer() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    cq_->Shutdown();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  struct Call {
    enum class Step { kAccepted, kRead, kWrote, kFinished };
    grpc::GenericServerContext context;
    grpc::GenericServerAsyncReaderWriter stream{&context};
    grpc::ByteBuffer request;
    Step step = Step::kAccepted;
  };

  void Accept() {
    auto* call = new Call;
    service_.RequestCall(&call->context, &call->stream, cq_.get(), cq_.get(), call);
  }

  void Serve() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
      auto* call = static_cast<Call*>(tag);
      switch (call->step) {
        case Call::Step::kAccepted:
          if (!ok) {  // shutting down
            delete call;
            break;
          }
          Accept();
          call->step = Call::Step::kRead;
          call->stream.Read(&call->request, call);
          break;
        case Call::Step::kRead:
          call->step = Call::Step::kFinished;
          if (!ok) {  // the client half-closed its stream
            call->stream.Finish(grpc::Status::OK, call);
          } else {
            CopyOut(call->request, gradient_.data(), n_);
            call->request.Clear();
            if (call->context.method() == kUnaryMethod) {
              call->stream.WriteAndFinish(reply_, grpc::WriteOptions(), grpc::Status::OK, call);
            } else {
              call->step = Call::Step::kWrote;
              call->stream.Write(reply_, call);
            }
          }
          break;
        case Call::Step::kWrote:
          if (!ok) {
            call->step = Call::Step::kFinished;
            call->stream.Finish(grpc::Status::OK, call);
          } else {
            call->step = Call::Step::kRead;
            call->stream.Read(&call->request, call);
          }
          break;
        case Call::Step::kFinished:
          delete call;
          break;
      }
    }
  }

  const size_t n_;
  std::vector<char> gradient_, params_;
  grpc::ByteBuffer reply_;
  grpc::AsyncGenericService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

// Waits for the one event the caller has outstanding on `cq`, which must succeed.
void Await(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  if (!cq->Next(&tag, &ok) || !ok) std::abort();
}

// Bytes per second moved by N-byte request/reply rounds through gRPC: one bidi stream for
// the whole run (`unary` false) or one unary call per round.
double Grpc(size_t n, bool unary) {
  GrpcPeer peer(n);
  grpc::ChannelArguments args;
  TuneGrpc(&args);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(peer.port()),
                                           grpc::InsecureChannelCredentials(), args);
  // Connected before the clock starts, as the other two dial first.
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::abort();
  }
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  std::vector<char> grads(n, 1), params(n);
  const grpc::ByteBuffer request = Borrow(grads.data(), n);
  grpc::ClientContext stream_context;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream;
  if (!unary) {
    stream = stub.PrepareCall(&stream_context, kStreamMethod, &cq);
    stream->StartCall(nullptr);
    Await(&cq);
  }
  int64_t rounds = 0;
  const auto start = Clock::now();
  double seconds = 0;
  do {
    grpc::ByteBuffer reply;
    if (unary) {
      grpc::ClientContext context;
      grpc::Status status;
      auto call = stub.PrepareUnaryCall(&context, kUnaryMethod, request, &cq);
      call->StartCall();
      call->Finish(&reply, &status, nullptr);
      Await(&cq);
      if (!status.ok()) std::abort();
    } else {
      // Write and read outstanding together, as a ps client would pipeline them.
      stream->Write(request, nullptr);
      stream->Read(&reply, nullptr);
      Await(&cq);
      Await(&cq);
    }
    CopyOut(reply, params.data(), n);
    ++rounds;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (seconds < kRoundSeconds);
  if (params.front() != 2 || params.back() != 2) std::abort();  // the server's bytes came back
  if (!unary) {
    stream->WritesDone(nullptr);
    Await(&cq);
    grpc::Status status;
    stream->Finish(&status, nullptr);
    Await(&cq);
    if (!status.ok()) std::abort();
  }
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(rounds) / seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void PrintRuns(const char* key, const char* size, const std::vector<double>& runs) {
  std::printf("  \"%s_%s\": [%.3f, %.3f, %.3f],\n", key, size, runs[0] / 1e9, runs[1] / 1e9,
              runs[2] / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const bool grpc_unary = argc > 1 && std::strcmp(argv[1], "--grpc-unary") == 0;
  if (argc > 2 || (argc == 2 && !grpc_unary)) {
    std::fprintf(stderr, "usage: ps_bench [--grpc-unary]\n");
    return 2;
  }
  struct Size {
    const char* name;
    size_t bytes;
  };
  const Size sizes[] = {{"4mib", size_t{4} << 20}, {"900kb", 225034 * 4}};
  std::printf("{\n");
  bool first = true;
  for (const Size& s : sizes) {
    std::vector<double> raw, tarn, grpc;
    for (int round = 0; round < 3; ++round) {
      raw.push_back(RawTcp(s.bytes));
      tarn.push_back(PushPull(s.bytes));
      grpc.push_back(Grpc(s.bytes, grpc_unary));
    }
    const double r = Median(raw), t = Median(tarn), g = Median(grpc);
    std::printf("%s  \"raw_tcp_gbytes_per_s_%s\": %.3f,\n", first ? "" : ",\n", s.name, r / 1e9);
    std::printf("  \"tarn_push_pull_gbytes_per_s_%s\": %.3f,\n", s.name, t / 1e9);
    std::printf("  \"grpc_gbytes_per_s_%s\": %.3f,\n", s.name, g / 1e9);
    PrintRuns("tarn_runs", s.name, tarn);
    PrintRuns("raw_runs", s.name, raw);
    PrintRuns("grpc_runs", s.name, grpc);
    std::printf("  \"ratio_grpc_%s\": %.3f,\n", s.name, g / r);
    std::printf("  \"tarn_vs_grpc_%s\": %.3f,\n", s.name, t / g);
    std::printf("  \"ratio_%s\": %.3f", s.name, t / r);
    first = false;
  }
  // The challenge's cost, once per connection: connecting with and without it.
  std::vector<double> open, challenged;
  for (int round = 0; round < 3; ++round) {
    open.push_back(ConnectSeconds(false));
    challenged.push_back(ConnectSeconds(true));
  }
  std::printf(",\n  \"connect_ms_without_challenge\": %.4f", Median(open) * 1e3);
  std::printf(",\n  \"connect_ms_with_challenge\": %.4f", Median(challenged) * 1e3);
  std::printf(",\n  \"grpc_mode\": \"%s\"", grpc_unary ? "unary" : "stream");
  std::printf(",\n  \"message_bytes_4mib\": %zu,\n  \"message_bytes_900kb\": %zu\n}\n",
              sizes[0].bytes, sizes[1].bytes);
  return 0;
}
