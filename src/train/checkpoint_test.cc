#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace tarn::train {
namespace {

Checkpoint Make(int64_t step) {
  Checkpoint c;
  c.step = step;
  c.model = "cnn";
  c.optimizer = "adam";
  c.epoch = 2;
  c.position = 17;
  c.arrays = {{1, 2, 3}, {0.1f, 0.2f, 0.3f}, {4, 5, static_cast<float>(step)}};
  return c;
}

class CheckpointTest : public ::testing::Test {
 protected:
  TempDir temp_{"tarn-checkpoint"};
  const std::string dir_ = temp_.path() + "/ckpt";
};

TEST_F(CheckpointTest, TheNewestIsReadBackWholeAndOldOnesArePruned) {
  EXPECT_EQ(ReadLatestCheckpoint(dir_).status().code(), StatusCode::kNotFound);
  for (int64_t step : {100, 200, 300, 400}) ASSERT_TRUE(WriteCheckpoint(dir_, Make(step), 2).ok());
  // A temporary directory left by a crash is not a checkpoint.
  std::filesystem::create_directories(dir_ + "/.tmp-ckpt-500-1");
  auto c = ReadLatestCheckpoint(dir_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 400);
  EXPECT_EQ(c->model, "cnn");
  EXPECT_EQ(c->optimizer, "adam");
  EXPECT_EQ(c->epoch, 2);
  EXPECT_EQ(c->position, 17);
  EXPECT_EQ(c->arrays, Make(400).arrays);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ckpt-200"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt-300"));
}

TEST_F(CheckpointTest, ACorruptCheckpointIsAnErrorNotAFreshStart) {
  ASSERT_TRUE(WriteCheckpoint(dir_, Make(7)).ok());
  const std::string state = dir_ + "/ckpt-7/state.bin";
  {
    std::fstream f(state, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x7f');
  }
  auto c = ReadLatestCheckpoint(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "checkpoint " + dir_ + "/ckpt-7: state.bin does not match its checksum (corrupt)");
  std::filesystem::resize_file(state, 10);
  c = ReadLatestCheckpoint(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("state.bin holds 10 bytes, meta.json says 36"),
            std::string::npos)
      << c.status().message();
  std::ofstream(dir_ + "/ckpt-7/meta.json") << "{\"step\": 7}";
  c = ReadLatestCheckpoint(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("meta.json: "), std::string::npos) << c.status().message();
}

TEST_F(CheckpointTest, RaggedArraysAreRefused) {
  Checkpoint c = Make(1);
  c.arrays[1].pop_back();
  EXPECT_FALSE(WriteCheckpoint(dir_, c).ok());
  EXPECT_EQ(ReadLatestCheckpoint(dir_).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tarn::train
