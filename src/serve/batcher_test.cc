#include "serve/batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

namespace tarn::serve {
namespace {

Tensor Rows(std::vector<float> values) {
  Tensor t;
  t.shape = {static_cast<int64_t>(values.size()), 1};
  t.data = std::move(values);
  return t;
}

// Doubles every value; records the batch sizes; the first batch can be held until released.
struct Recorder {
  std::mutex mu;
  std::vector<int64_t> batches;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> hold_first{false};

  // Until the first batch is running (held, with hold_first).
  void WaitForABatch() {
    while (true) {
      std::lock_guard<std::mutex> lock(mu);
      if (!batches.empty()) return;
    }
  }

  Batcher::Runner Runner() {
    return [this](const Tensor& in) -> StatusOr<Tensor> {
      bool first;
      {
        std::lock_guard<std::mutex> lock(mu);
        first = batches.empty();
        batches.push_back(in.shape[0]);
      }
      if (first && hold_first) released.wait();
      Tensor out = in;
      for (float& v : out.data) v *= 2;
      return out;
    };
  }
};

TEST(BatcherTest, QueuedTasksShareOneBatchAndEachGetsItsOwnRows) {
  Recorder rec;
  rec.hold_first = true;
  BatchingParameters p{/*max_batch_size=*/8, /*batch_timeout_micros=*/0, 1, 10};
  Batcher batcher(p, rec.Runner());
  std::vector<std::promise<StatusOr<Tensor>>> answers(4);
  auto done = [&](int i) {
    return [&answers, i](StatusOr<Tensor> out, std::chrono::nanoseconds) {
      answers[i].set_value(std::move(out));
    };
  };
  // The first runs alone and is held; the next three queue behind it and go as one batch.
  ASSERT_TRUE(batcher.Submit(Rows({1}), done(0)).ok());
  rec.WaitForABatch();
  ASSERT_TRUE(batcher.Submit(Rows({2, 3}), done(1)).ok());
  ASSERT_TRUE(batcher.Submit(Rows({4}), done(2)).ok());
  ASSERT_TRUE(batcher.Submit(Rows({5, 6, 7}), done(3)).ok());
  EXPECT_EQ(batcher.QueuedExamples(), 6);
  rec.release.set_value();
  std::vector<std::vector<float>> expected = {{2}, {4, 6}, {8}, {10, 12, 14}};
  for (int i = 0; i < 4; ++i) {
    auto out = answers[i].get_future().get();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->data, expected[i]);
    EXPECT_EQ(out->shape[0], static_cast<int64_t>(expected[i].size()));
  }
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{1, 6}));
}

TEST(BatcherTest, AFullQueueIsUnavailableAtOnce) {
  Recorder rec;
  rec.hold_first = true;
  BatchingParameters p{/*max_batch_size=*/2, 0, 1, /*max_enqueued_batches=*/2};
  Batcher batcher(p, rec.Runner());
  std::atomic<int> answered{0};
  auto done = [&](StatusOr<Tensor>, std::chrono::nanoseconds) { ++answered; };
  ASSERT_TRUE(batcher.Submit(Rows({1}), done).ok());
  rec.WaitForABatch();
  ASSERT_TRUE(batcher.Submit(Rows({1, 2}), done).ok());
  ASSERT_TRUE(batcher.Submit(Rows({3, 4}), done).ok());
  Status full = batcher.Submit(Rows({5}), done);
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos);
  rec.release.set_value();
  while (answered < 3) std::this_thread::yield();
}

TEST(BatcherTest, AModelErrorReachesEveryTaskOfTheBatch) {
  BatchingParameters p{4, /*batch_timeout_micros=*/200000, 1, 10};
  Batcher batcher(p, [](const Tensor&) -> StatusOr<Tensor> {
    return InvalidArgumentError("bad input");
  });
  std::promise<Status> a, b;
  ASSERT_TRUE(batcher.Submit(Rows({1, 2}), [&](StatusOr<Tensor> o, auto) {
    a.set_value(o.status());
  }).ok());
  ASSERT_TRUE(batcher.Submit(Rows({3, 4}), [&](StatusOr<Tensor> o, auto) {
    b.set_value(o.status());
  }).ok());
  EXPECT_EQ(a.get_future().get().message(), "bad input");
  EXPECT_EQ(b.get_future().get().message(), "bad input");
}

TEST(BatcherTest, ExamplesOfOtherShapesAreNotMixed) {
  Recorder rec;
  rec.hold_first = true;
  BatchingParameters p{8, 0, 1, 10};
  Batcher batcher(p, rec.Runner());
  std::atomic<int> answered{0};
  auto done = [&](StatusOr<Tensor> o, auto) {
    EXPECT_TRUE(o.ok());
    ++answered;
  };
  ASSERT_TRUE(batcher.Submit(Rows({1}), done).ok());
  rec.WaitForABatch();
  Tensor wide;
  wide.shape = {1, 2};
  wide.data = {1, 2};
  ASSERT_TRUE(batcher.Submit(Rows({1}), done).ok());
  ASSERT_TRUE(batcher.Submit(wide, done).ok());
  ASSERT_TRUE(batcher.Submit(Rows({2}), done).ok());
  rec.release.set_value();
  while (answered < 4) std::this_thread::yield();
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{1, 2, 1}));
}

// An announced request that never comes (a slow or broken client) holds a partial batch
// back no longer than the timeout.
TEST(BatcherTest, TheTimeoutSendsAPartialBatch) {
  Recorder rec;
  BatchingParameters p{64, /*batch_timeout_micros=*/1000, 1, 10};
  Batcher batcher(p, rec.Runner());
  Batcher::Arrival never = batcher.Announce();
  std::promise<void> done;
  ASSERT_TRUE(batcher.Submit(Rows({1}), [&](StatusOr<Tensor>, auto) { done.set_value(); }).ok());
  done.get_future().wait();  // answered although the batch never filled
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{1}));
}

// A lone request, with nothing else queued, announced or running, goes at once: were it
// held for the timeout (an hour here) the test would time out instead.
TEST(BatcherTest, ALoneRequestDoesNotWaitOutTheTimeout) {
  Recorder rec;
  BatchingParameters p{64, /*batch_timeout_micros=*/3'600'000'000, 1, 10};
  Batcher batcher(p, rec.Runner());
  for (int i = 0; i < 3; ++i) {  // one client, one request after the other
    std::promise<StatusOr<Tensor>> answer;
    Batcher::Arrival arrival = batcher.Announce();
    ASSERT_TRUE(batcher
                    .Submit(
                        Rows({float(i)}),
                        [&](StatusOr<Tensor> out, auto) { answer.set_value(std::move(out)); },
                        std::move(arrival))
                    .ok());
    auto out = answer.get_future().get();
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->data, std::vector<float>{2.0f * i});
  }
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{1, 1, 1}));
}

// A request that fails to decode ends its announcement: the others do not wait for it.
TEST(BatcherTest, ADroppedAnnouncementReleasesTheBatch) {
  Recorder rec;
  BatchingParameters p{64, /*batch_timeout_micros=*/3'600'000'000, 1, 10};
  Batcher batcher(p, rec.Runner());
  Batcher::Arrival bad = batcher.Announce();
  std::promise<void> done;
  ASSERT_TRUE(batcher.Submit(Rows({1}), [&](StatusOr<Tensor>, auto) { done.set_value(); }).ok());
  bad = Batcher::Arrival();  // its decode failed
  done.get_future().wait();
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{1}));
}

// Requests announced together (a burst being decoded) wait for each other and go as one
// batch, however long the timeout.
TEST(BatcherTest, AnnouncedRequestsWaitForEachOther) {
  Recorder rec;
  BatchingParameters p{64, /*batch_timeout_micros=*/3'600'000'000, 1, 10};
  Batcher batcher(p, rec.Runner());
  std::vector<Batcher::Arrival> arrivals;
  for (int i = 0; i < 4; ++i) arrivals.push_back(batcher.Announce());
  std::atomic<int> answered{0};
  auto done = [&](StatusOr<Tensor> o, auto) {
    EXPECT_TRUE(o.ok());
    ++answered;
  };
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(batcher.Submit(Rows({float(i)}), done, std::move(arrivals[i])).ok());
  }
  while (answered < 4) std::this_thread::yield();
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{4}));
}

// With two batch threads, tasks that arrive while a batch runs wait for it (the load it
// shows) instead of going alone on the idle thread, and then go as one batch.
TEST(BatcherTest, WhileABatchRunsTheNextOneForms) {
  Recorder rec;
  rec.hold_first = true;
  BatchingParameters p{64, /*batch_timeout_micros=*/3'600'000'000, /*num_batch_threads=*/2, 10};
  Batcher batcher(p, rec.Runner());
  std::atomic<int> answered{0};
  auto done = [&](StatusOr<Tensor> o, auto) {
    EXPECT_TRUE(o.ok());
    ++answered;
  };
  ASSERT_TRUE(batcher.Submit(Rows({1}), done).ok());
  rec.WaitForABatch();
  for (float v : {2.0f, 3.0f, 4.0f}) {
    ASSERT_TRUE(batcher.Submit(Rows({v}), done).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the idle thread could go
  }
  rec.release.set_value();
  while (answered < 4) std::this_thread::yield();
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{1, 3}));
}

}  // namespace
}  // namespace tarn::serve
