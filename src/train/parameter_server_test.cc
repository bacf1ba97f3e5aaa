// A real ParameterServer and real PsClients over loopback TCP, with plain float arrays as
// the "model": async and sync updates, backup workers, stale gradients, membership, the
// chief's initialisation, and a ps that restarts under a worker.
#include "train/parameter_server.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include "train/ps_client.h"
#include "train/ps_wire.h"

namespace tarn::train {
namespace {

using namespace std::chrono_literals;

// Two parameters of 3 and 5 elements over `servers` servers, SGD with lr 1 and no momentum,
// so each applied gradient g moves the parameters by exactly -g (or -mean(g) when synced).
class PsTest : public ::testing::Test {
 protected:
  void StartServers(int n, bool sync = false, int backup = 0) {
    plan_ = PlanShards({3, 5}, n, 2);
    for (int i = 0; i < n; ++i) {
      ParameterServer::Options o;
      o.host = "127.0.0.1";
      o.elements = plan_.elements[static_cast<size_t>(i)];
      o.optimizer.kind = "sgd";
      o.optimizer.learning_rate = 1.0;
      o.optimizer.momentum = 0.0;
      o.sync = sync;
      o.backup_workers = backup;
      o.secret = server_secret_;
      o.log = [this](const std::string& line) {
        std::lock_guard<std::mutex> lock(log_mu_);
        log_ += line + "\n";
      };
      auto s = ParameterServer::Create(o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      ASSERT_TRUE((*s)->Start().ok());
      addresses_.push_back("127.0.0.1:" + std::to_string((*s)->port()));
      servers_.push_back(std::move(*s));
    }
  }
  std::unique_ptr<PsClient> Client(int64_t worker, std::chrono::milliseconds retry = 10s) {
    PsClient::Options o;
    o.servers = addresses_;
    o.worker = worker;
    o.plan = plan_;
    o.retry_for = retry;
    o.secret = client_secret_;
    auto c = PsClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::string Log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  std::string server_secret_, client_secret_;
  std::mutex log_mu_;
  std::string log_;  // the servers' log lines
  ShardPlan plan_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
};

struct Model {
  float a[3], b[5];
  std::vector<float*> arrays() { return {a, b}; }
};

// Only a process that holds the assembly's secret talks to a ps: a wrong or missing secret,
// or a frame sent without answering the challenge (the kSnapshot another account sent to
// read a tenant's parameters), is refused with a log line, and gets nothing.
TEST_F(PsTest, TheChallengeAdmitsOnlyTheAssemblysProcesses) {
  server_secret_ = "0123456789abcdef0123456789abcdef";
  StartServers(1);
  client_secret_ = server_secret_;
  auto chief = Client(0);
  ASSERT_NE(chief, nullptr);
  Model init{{1, 2, 3}, {4, 5, 6, 7, 8}};
  ASSERT_TRUE(chief->Init(init.arrays()).ok());
  Model got{};
  ASSERT_TRUE(chief->Pull(got.arrays()).ok());
  EXPECT_EQ(got.b[4], 8);

  PsClient::Options o;
  o.servers = addresses_;
  o.plan = plan_;
  o.retry_for = 2s;
  o.secret = "another assembly's secret";
  auto wrong = PsClient::Connect(o);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("does not hold the assembly's secret"),
            std::string::npos)
      << wrong.status().message();
  o.secret.clear();
  auto none = PsClient::Connect(o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("$TARN_ASSEMBLY_SECRET is unset"), std::string::npos)
      << none.status().message();

  // A snapshot asked for without the challenge's answer gets no parameters.
  const int port = std::atoi(addresses_[0].c_str() + addresses_[0].rfind(':') + 1);
  auto raw = Connection::Dial("127.0.0.1", port, 5s);
  ASSERT_TRUE(raw.ok());
  raw->SetTimeout(5s);
  auto challenge = raw->ReadHeader();
  ASSERT_TRUE(challenge.ok());
  EXPECT_EQ(challenge->type, static_cast<uint16_t>(MessageType::kChallenge));
  ASSERT_TRUE(raw->Skip(challenge->length).ok());
  ASSERT_TRUE(raw->Send(MessageType::kSnapshot, 1, "").ok());
  auto reply = raw->ReadHeader();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->type, static_cast<uint16_t>(MessageType::kError));
  ASSERT_TRUE(raw->Skip(reply->length).ok());
  EXPECT_FALSE(raw->ReadHeader().ok()) << "the connection is closed";

  const std::string log = Log();
  EXPECT_NE(log.find("refused a connection from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("its answer to the challenge is wrong"), std::string::npos) << log;
  EXPECT_NE(log.find("its first frame (type 9) is no answer to the challenge"), std::string::npos)
      << log;
  // The parameters are as the chief left them.
  ASSERT_TRUE(chief->Pull(got.arrays()).ok());
  EXPECT_EQ(got.a[0], 1);
}

TEST_F(PsTest, AsyncPushesApplyAtOnceAcrossShards) {
  StartServers(2);
  auto chief = Client(0);
  ASSERT_NE(chief, nullptr);
  EXPECT_FALSE(chief->initialized());
  Model init{{1, 2, 3}, {4, 5, 6, 7, 8}};
  ASSERT_TRUE(chief->Init(init.arrays()).ok());
  auto other = Client(1);
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->initialized());

  Model seen{};
  auto step = other->Pull(seen.arrays());
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, 0);
  EXPECT_EQ(std::vector<float>(seen.b, seen.b + 5), (std::vector<float>{4, 5, 6, 7, 8}));
  Model grad{{1, 1, 1}, {0.5, 0.5, 0.5, 0.5, 0.5}};
  ASSERT_EQ(*other->Push(grad.arrays()), 1);
  ASSERT_EQ(*chief->Push(grad.arrays()), 2);
  ASSERT_EQ(*chief->Pull(seen.arrays()), 2);
  EXPECT_EQ(std::vector<float>(seen.a, seen.a + 3), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(std::vector<float>(seen.b, seen.b + 5), (std::vector<float>{3, 4, 5, 6, 7}));

  // A second Init (a restarted chief) changes nothing.
  Model zeros{};
  ASSERT_TRUE(Client(0)->Init(zeros.arrays()).ok());
  ASSERT_TRUE(chief->Pull(seen.arrays()).ok());
  EXPECT_EQ(seen.a[2], 1);
  EXPECT_EQ(servers_[0]->stats().workers, 2);
}

// kPushPull: one round trip that pushes a gradient and brings back the parameters it made,
// as a Pull right after the Push would: across shards, async and sync (where the answer
// waits for the step, and a stale gradient is answered with the current parameters).
TEST_F(PsTest, APushPullAnswersWithWhatAPullRightAfterThePushWouldGive) {
  StartServers(2);
  auto chief = Client(0), other = Client(1);
  ASSERT_NE(chief, nullptr);
  ASSERT_NE(other, nullptr);
  Model grad{{1, 1, 1}, {0.5, 0.5, 0.5, 0.5, 0.5}};
  Model got{};
  // Before the chief's initialisation: refused, as a Push is, and the connection stays.
  auto early = other->PushPull(grad.arrays(), got.arrays());
  ASSERT_FALSE(early.ok());
  EXPECT_TRUE(IsNotInitialized(early.status())) << early.status().ToString();
  Model init{{1, 2, 3}, {4, 5, 6, 7, 8}};
  ASSERT_TRUE(chief->Init(init.arrays()).ok());
  ASSERT_TRUE(other->Pull(got.arrays()).ok());
  const ParameterServer::Stats before = servers_[1]->stats();
  ASSERT_EQ(*other->PushPull(grad.arrays(), got.arrays()), 1);
  EXPECT_EQ(std::vector<float>(got.a, got.a + 3), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(std::vector<float>(got.b, got.b + 5), (std::vector<float>{3.5, 4.5, 5.5, 6.5, 7.5}));
  EXPECT_EQ(servers_[1]->stats().pushes, before.pushes + 1);
  EXPECT_EQ(servers_[1]->stats().pulls, before.pulls + 1);
  // The other worker's update comes back with this one's.
  ASSERT_EQ(*chief->Push(grad.arrays()), 2);
  ASSERT_EQ(*other->PushPull(grad.arrays(), got.arrays()), 3);
  Model pulled{};
  ASSERT_EQ(*chief->Pull(pulled.arrays()), 3);
  EXPECT_EQ(std::vector<float>(got.a, got.a + 3), std::vector<float>(pulled.a, pulled.a + 3));
  EXPECT_EQ(std::vector<float>(got.b, got.b + 5), std::vector<float>(pulled.b, pulled.b + 5));
  EXPECT_EQ(got.a[0], -2);
}

TEST_F(PsTest, ASyncPushPullAnswersOnceTheStepIsApplied) {
  StartServers(2, /*sync=*/true);
  auto w0 = Client(0), w1 = Client(1);
  Model init{}, seen{};
  ASSERT_TRUE(w0->Init(init.arrays()).ok());
  ASSERT_TRUE(w0->Pull(seen.arrays()).ok());
  ASSERT_TRUE(w1->Pull(seen.arrays()).ok());
  Model g0{{2, 2, 2}, {2, 2, 2, 2, 2}}, g1{{4, 4, 4}, {0, 0, 0, 0, 0}};
  Model got0{}, got1{};
  auto first =
      std::async(std::launch::async, [&] { return *w0->PushPull(g0.arrays(), got0.arrays()); });
  EXPECT_EQ(first.wait_for(300ms), std::future_status::timeout) << "a sync step waits";
  EXPECT_EQ(*w1->PushPull(g1.arrays(), got1.arrays()), 1);
  EXPECT_EQ(first.get(), 1);
  EXPECT_EQ(got0.a[0], -3);  // -(2 + 4) / 2
  EXPECT_EQ(got0.b[4], -1);  // -(2 + 0) / 2
  EXPECT_EQ(got1.a[2], -3);
  EXPECT_EQ(got1.b[0], -1);
  // w0 pushes at step 1 (its answer's) and waits for w1, which pushes a gradient of step 0
  // (it skipped the answer): dropped, and answered at once with the step-1 parameters.
  auto second =
      std::async(std::launch::async, [&] { return *w0->PushPull(g0.arrays(), got0.arrays()); });
  ASSERT_TRUE(w1->Push(g1.arrays()).ok());  // w1's own step: at 1, it completes step 2
  EXPECT_EQ(second.get(), 2);
  EXPECT_EQ(got0.a[0], -6);
  Model stale{};
  w1 = Client(1);  // pulled nothing: its gradient counts as computed at step 0
  EXPECT_EQ(*w1->PushPull(g1.arrays(), stale.arrays()), 2);
  EXPECT_EQ(servers_[0]->stats().stale_pushes, 1);
  EXPECT_EQ(stale.a[0], -6);
}

TEST_F(PsTest, PullWaitsForTheChiefsInitialisation) {
  StartServers(1);
  auto worker = Client(1);
  ASSERT_NE(worker, nullptr);
  auto pulled = std::async(std::launch::async, [&] {
    Model m{};
    auto s = worker->Pull(m.arrays());
    return s.ok() ? m.b[4] : -1.0f;
  });
  std::this_thread::sleep_for(300ms);
  Model init{{0, 0, 0}, {0, 0, 0, 0, 9}};
  ASSERT_TRUE(Client(0)->Init(init.arrays()).ok());
  EXPECT_EQ(pulled.get(), 9.0f);
}

TEST_F(PsTest, SyncAveragesTheGradientsOfEveryMemberAndDropsStaleOnes) {
  StartServers(2, /*sync=*/true);
  auto w0 = Client(0), w1 = Client(1);
  Model init{}, seen{};
  ASSERT_TRUE(w0->Init(init.arrays()).ok());
  ASSERT_TRUE(w0->Pull(seen.arrays()).ok());
  ASSERT_TRUE(w1->Pull(seen.arrays()).ok());
  Model g0{{2, 2, 2}, {2, 2, 2, 2, 2}}, g1{{4, 4, 4}, {0, 0, 0, 0, 0}};
  // w0's push waits until w1's arrives; the step then applies the mean.
  auto first = std::async(std::launch::async, [&] { return *w0->Push(g0.arrays()); });
  EXPECT_EQ(first.wait_for(300ms), std::future_status::timeout) << "a sync step waits";
  EXPECT_EQ(*w1->Push(g1.arrays()), 1);
  EXPECT_EQ(first.get(), 1);
  ASSERT_EQ(*w0->Pull(seen.arrays()), 1);
  EXPECT_EQ(seen.a[0], -3);  // -(2 + 4) / 2
  EXPECT_EQ(seen.b[0], -1);  // -(2 + 0) / 2

  // w1 did not pull: its next gradient was computed at step 0 and is dropped.
  auto stale = std::async(std::launch::async, [&] { return *w1->Push(g1.arrays()); });
  EXPECT_EQ(stale.get(), 1);
  EXPECT_EQ(servers_[0]->stats().stale_pushes, 1);
}

TEST_F(PsTest, BackupWorkersLetAStepGoOnWithoutTheSlowest) {
  StartServers(1, /*sync=*/true, /*backup=*/1);
  auto w0 = Client(0), w1 = Client(1);
  Model init{}, seen{};
  ASSERT_TRUE(w0->Init(init.arrays()).ok());
  ASSERT_TRUE(w0->Pull(seen.arrays()).ok());
  Model g{{1, 1, 1}, {1, 1, 1, 1, 1}};
  EXPECT_EQ(*w0->Push(g.arrays()), 1) << "1 of 2 workers suffices with 1 backup";
  EXPECT_EQ(servers_[0]->stats().workers, 2);
}

TEST_F(PsTest, AWorkerThatLeavesNoLongerHoldsUpASyncStep) {
  StartServers(1, /*sync=*/true);
  auto w0 = Client(0);
  auto w1 = Client(1);
  Model init{}, seen{};
  ASSERT_TRUE(w0->Init(init.arrays()).ok());
  ASSERT_TRUE(w0->Pull(seen.arrays()).ok());
  Model g{{1, 1, 1}, {1, 1, 1, 1, 1}};
  auto waiting = std::async(std::launch::async, [&] { return *w0->Push(g.arrays()); });
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout);
  w1.reset();  // its connections close: membership drops to 1 and the step completes
  EXPECT_EQ(waiting.get(), 1);
  EXPECT_EQ(servers_[0]->stats().workers, 1);
}

// Connections come and go (restarted workers, flexes): the threads that served the ended
// ones are joined as new ones arrive, not kept until the ps stops.
TEST_F(PsTest, EndedConnectionsLeaveNoThreadsBehind) {
  StartServers(1);
  for (int i = 0; i < 20; ++i) {
    auto w = Client(i);
    Model seen{};
    ASSERT_TRUE(w->Init(seen.arrays()).ok());
  }
  // The last client's thread may still be ending; one more connection joins every ended one.
  for (int tries = 0; tries < 100 && servers_[0]->stats().workers > 0; ++tries) {
    std::this_thread::sleep_for(10ms);
  }
  auto last = Client(99);
  Model seen{};
  ASSERT_TRUE(last->Pull(seen.arrays()).ok());
  EXPECT_LE(servers_[0]->stats().connection_threads, 2);
}

TEST_F(PsTest, AWorkerReconnectsToARestartedServer) {
  StartServers(1);
  auto w = Client(0);
  Model init{{1, 1, 1}, {1, 1, 1, 1, 1}}, seen{};
  ASSERT_TRUE(w->Init(init.arrays()).ok());
  const int port = servers_[0]->port();
  servers_[0]->Stop();
  servers_[0].reset();
  // The same port again, as a restarted ps task would; it has lost its state, and a pull
  // waits for initialisation until the chief sends it again.
  std::thread restart([&] {
    std::this_thread::sleep_for(300ms);
    ParameterServer::Options o;
    o.host = "127.0.0.1";
    o.port = port;
    o.elements = plan_.elements[0];
    o.optimizer.kind = "sgd";
    auto s = ParameterServer::Create(o);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Start().ok());
    servers_[0] = std::move(*s);
  });
  Model grad{};
  auto pushed = w->Push(grad.arrays());
  restart.join();
  EXPECT_FALSE(pushed.ok()) << "a push to a server that lost its parameters is refused";
  ASSERT_TRUE(w->Init(init.arrays()).ok());
  ASSERT_TRUE(w->Pull(seen.arrays()).ok());
  EXPECT_EQ(seen.b[4], 1);
}

// A snapshot of every server's state, restored into a cluster of a different size, goes on
// exactly as the original would: parameters and optimiser moments both came back.
TEST_F(PsTest, SnapshotAndRestoreAcrossADifferentNumberOfServers) {
  auto start = [&](int n, bool adam) {
    servers_.clear();
    addresses_.clear();
    plan_ = PlanShards({3, 5}, n, 2);
    for (int i = 0; i < n; ++i) {
      ParameterServer::Options o;
      o.host = "127.0.0.1";
      o.elements = plan_.elements[static_cast<size_t>(i)];
      o.optimizer.kind = adam ? "adam" : "sgd";
      o.optimizer.learning_rate = 0.1;
      auto s = ParameterServer::Create(o);
      ASSERT_TRUE(s.ok() && (*s)->Start().ok());
      addresses_.push_back("127.0.0.1:" + std::to_string((*s)->port()));
      servers_.push_back(std::move(*s));
    }
  };
  start(2, true);
  auto w = Client(0);
  Model init{{1, 2, 3}, {4, 5, 6, 7, 8}}, seen{};
  ASSERT_TRUE(w->Init(init.arrays()).ok());
  Model g{{1, -1, 0.5}, {2, 0, -2, 1, 1}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w->Push(g.arrays()).ok());
  auto snapshot = w->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  EXPECT_EQ(snapshot->step, 3);
  ASSERT_EQ(snapshot->arrays.size(), 3u);  // parameters, Adam's two moments
  ASSERT_EQ(snapshot->arrays[0].size(), 8u);
  ASSERT_TRUE(w->Push(g.arrays()).ok());  // the original goes one step further
  Model original{};
  ASSERT_TRUE(w->Pull(original.arrays()).ok());
  w.reset();

  start(3, true);
  auto r = Client(0);
  ASSERT_FALSE(r->initialized());
  ASSERT_TRUE(r->Restore(*snapshot).ok());
  ASSERT_EQ(*r->Pull(seen.arrays()), 3);
  EXPECT_EQ(std::vector<float>(seen.a, seen.a + 3),
            std::vector<float>(snapshot->arrays[0].begin(), snapshot->arrays[0].begin() + 3));
  ASSERT_TRUE(r->Push(g.arrays()).ok());
  ASSERT_TRUE(r->Pull(seen.arrays()).ok());
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(seen.a[i], original.a[i]) << i;
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(seen.b[i], original.b[i]) << i;

  // A state of another shape is refused by the client, and by an SGD server.
  PsClient::ModelState wrong = *snapshot;
  wrong.arrays[1].pop_back();
  EXPECT_FALSE(r->Restore(wrong).ok());
  start(1, false);
  auto sgd = Client(0);
  Status refused = sgd->Restore(*snapshot);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("a different model, ps count or optimizer?"), std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace tarn::train
