// The parameter-server wire protocol: frames over one TCP connection per worker and server.
// A frame is a 24-byte header (magic "TRNP", version, type, request id, body length; the
// host's little-endian byte order, which every machine tarn runs on has) and the body.
// Parameters and gradients travel as raw float32 in ShardPlan order, sent from and read
// into the tensors' own memory (writev/readv): no serialisation and no copy. Control
// messages (register, errors) carry small JSON bodies.
//
//   worker -> ps                         ps -> worker
//                                         kChallenge 32-byte nonce, first on every
//                                                    connection (empty: no secret)
//   kProof     HMAC-SHA256(secret,         (the ps closes a connection whose proof is wrong)
//              "tarn-ps-v2" nonce)
//   kRegister  {"worker": i, "chief": b}  kRegistered {"initialized", "step", "workers", "sync",
//                                                     "push_pull" (it takes kPushPull)}
//   kInit      u64 0, floats              kAck u64 step   (ignored when already initialised)
//   kPull      (empty)                    kParams u64 step, floats; or kError
//   kPush      u64 step, floats           kAck u64 step   (sync: once that step is applied)
//   kPushPull  u64 step, floats           kParams u64 step, floats: kPush's, then what a kPull
//                                                     would return at once (one round trip
//                                                     a step instead of two)
//   kSnapshot  (empty)                    kState u64 step, u64 arrays, floats x arrays
//   kRestore   u64 step, u64 arrays,      kAck u64 step   (ignored when already initialised)
//              floats x arrays
//                                         kError {"error": "..."} for anything refused
//
// The challenge admits only processes that hold the assembly's secret
// ($TARN_ASSEMBLY_SECRET, in its instances' environment alone): no other account's process,
// nor one of the same account outside the assembly, nor any process on a Slurm node can read
// (kSnapshot), overwrite (kRestore, kInit) or poison (kPush) the parameters.
//
// A state is the parameters, then the optimiser's moment arrays (1 for SGD's momentum, 2 for
// Adam's); a checkpoint is made of the states of every server.
//
// Why not gRPC: DESIGN.md records gRPC 1.51's synchronous unary calls at 35-55% of raw TCP
// on this machine for 4 MiB messages (each message is copied into and out of its byte
// buffers), below the 0.7x this protocol must reach; a frame written with writev straight
// from tensor memory costs the kernel's copy alone. bench/run ps measures this protocol
// against raw TCP in the same run (bench/results/ps.json).
//
// A Connection is used by one thread at a time; it owns its socket.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tarn::train {

enum class MessageType : uint16_t {
  kRegister = 1,
  kRegistered = 2,
  kInit = 3,
  kPull = 4,
  kParams = 5,
  kPush = 6,
  kAck = 7,
  kError = 8,
  kSnapshot = 9,
  kState = 10,
  kRestore = 11,
  kChallenge = 12,
  kProof = 13,
  kPushPull = 14,
};

struct FrameHeader {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t type = 0;
  uint64_t request = 0;
  uint64_t length = 0;
};
static_assert(sizeof(FrameHeader) == 24);

inline constexpr uint32_t kFrameMagic = 0x504e5254;  // "TRNP" in memory order
inline constexpr uint16_t kFrameVersion = 2;  // 2: the challenge
inline constexpr uint64_t kMaxFrameBody = uint64_t{4} << 30;

class Connection {
 public:
  // Connects to host:port (numeric or a name the system resolver knows) within `timeout`.
  static StatusOr<Connection> Dial(const std::string& host, int port,
                                   std::chrono::milliseconds timeout);
  explicit Connection(int fd);  // takes the socket
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // One frame whose body is `parts` one after another.
  Status Send(MessageType type, uint64_t request, std::span<const iovec> parts);
  Status Send(MessageType type, uint64_t request, std::string_view body);

  // The next frame's header; a bad magic, version or length is an error (the connection
  // is then unusable).
  StatusOr<FrameHeader> ReadHeader();
  // Reads exactly the bytes `parts` describe.
  Status Read(std::span<const iovec> parts);
  Status Read(void* data, size_t size);
  StatusOr<std::string> ReadString(size_t size);
  Status Skip(uint64_t size);

  // Blocking calls give up after this long (0: never).
  void SetTimeout(std::chrono::milliseconds timeout);
  int fd() const { return fd_; }
  void Close();

 private:
  int fd_ = -1;
};

// The ps's side of the challenge, first on a connection it accepted: sends a nonce and
// checks the proof (within the connection's timeout). With no secret, sends an empty
// challenge and admits anyone. PermissionDenied when the proof is wrong or missing.
Status OfferChallenge(Connection& c, std::string_view secret);
// The worker's side: reads the challenge and proves it holds `secret`. A ps that asks for a
// secret this process does not have is a FailedPrecondition saying so.
Status AnswerChallenge(Connection& c, std::string_view secret);

// A listening TCP socket on host:port (port 0: any); `bound_port` gets the port.
StatusOr<int> Listen(const std::string& host, int port, int* bound_port);

// "127.0.0.1:40312" for the peer of a connected socket; "an unknown peer" when not known.
std::string PeerAddress(int fd);

// The socket options both ends use: no Nagle delay, large buffers.
void TuneSocket(int fd);

}  // namespace tarn::train
