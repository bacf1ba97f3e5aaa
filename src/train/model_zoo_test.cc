// The model zoo, export and single-process training, on the real Fashion-MNIST files.
#include "train/model_zoo.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/subprocess.h"
#include "train/idx.h"
#include "train/local_trainer.h"
#include "train/model_export.h"

namespace tarn::train {
namespace {

using namespace std::chrono_literals;

constexpr const char* kData = "/usr/share/datasets/fashion-mnist";

int64_t CountParameters(const torch::jit::Module& m) {
  int64_t n = 0;
  for (const auto& [name, p] : NamedParameters(m)) n += p.numel();
  return n;
}

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-train-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TrainTest, ZooModelsHaveTheirShapesAndAreDeterministic) {
  auto cnn = MakeZooModel("cnn", 7);
  ASSERT_TRUE(cnn.ok()) << cnn.status().ToString();
  EXPECT_EQ(CountParameters(*cnn), 225034);
  auto mlp = MakeZooModel("mlp", 7);
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(CountParameters(*mlp), 101770);
  torch::Tensor x = torch::rand({4, 1, 28, 28});
  for (torch::jit::Module* m : {&*cnn, &*mlp}) {
    torch::Tensor y = m->forward({x}).toTensor();
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{4, 10}));
  }
  auto again = MakeZooModel("cnn", 7);
  auto other = MakeZooModel("cnn", 8);
  const auto a = NamedParameters(*cnn), b = NamedParameters(*again), c = NamedParameters(*other);
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a[0].first, "conv1_weight");
  EXPECT_TRUE(torch::equal(a[0].second, b[0].second));
  EXPECT_FALSE(torch::equal(a[0].second, c[0].second));
  // PyTorch's default bound for conv1: 1/sqrt(9).
  EXPECT_LE(a[0].second.abs().max().item<float>(), 1.0f / 3.0f);

  auto unknown = MakeZooModel("resnet", 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown model \"resnet\" (the zoo has mlp, cnn; or give the path of a TorchScript "
            "file)");
}

TEST_F(TrainTest, ASavedModelLoadsBackAndComputesTheSame) {
  auto cnn = MakeZooModel("cnn", 3);
  ASSERT_TRUE(cnn.ok());
  cnn->save(dir_ + "/cnn.pt");
  auto loaded = LoadModel(dir_ + "/cnn.pt", 0);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  torch::Tensor x = torch::rand({2, 1, 28, 28});
  EXPECT_TRUE(torch::allclose(cnn->forward({x}).toTensor(), loaded->forward({x}).toTensor()));
  EXPECT_TRUE(NamedParameters(*loaded)[0].second.requires_grad());

  std::ofstream(dir_ + "/junk.pt") << "not a model";
  auto junk = LoadModel(dir_ + "/junk.pt", 0);
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().message().rfind(dir_ + "/junk.pt: not a loadable TorchScript model", 0),
            0u)
      << junk.status().message();
}

TEST_F(TrainTest, TrainsExportsVersionsThatServeTheSameAccuracy) {
  LocalTrainingOptions o;
  o.model = "mlp";
  o.data_dir = kData;
  o.export_base = dir_ + "/models";
  o.train_limit = 6000;
  o.epochs = 2;
  o.threads = 2;
  std::vector<std::string> lines;
  o.log = [&](const std::string& l) { lines.push_back(l); };
  auto r = RunLocalTraining(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->steps, 2 * ((6000 + 63) / 64));
  EXPECT_GE(r->accuracy, 0.72) << "an MLP on 6,000 images for 2 epochs";
  EXPECT_LT(r->last_loss, 1.0);
  EXPECT_EQ(r->exported_version, 2);
  EXPECT_EQ(LatestVersion(o.export_base, "fmnist"), 2);

  // The exported version, loaded as a server would, scores what training measured.
  const std::string v2 = o.export_base + "/fmnist/2";
  auto meta = nlohmann::json::parse(ReadFileToString(v2 + "/meta.json").value_or("{}"));
  EXPECT_EQ(meta["version"], 2);
  EXPECT_EQ(meta["step"], r->steps);
  EXPECT_EQ(meta["input_shape"], nlohmann::json({1, 28, 28}));
  EXPECT_EQ(meta["labels"][7], "Sneaker");
  EXPECT_DOUBLE_EQ(meta["accuracy"].get<double>(), r->accuracy);
  torch::jit::Module served = torch::jit::load(v2 + "/model.pt");
  served.eval();
  auto test = ReadImageSet(kData, "t10k");
  ASSERT_TRUE(test.ok());
  torch::Tensor x = torch::from_blob(test->pixels.data(), {test->count, 1, 28, 28}, torch::kUInt8)
                        .to(torch::kFloat32) /
                    255.0;
  torch::Tensor y =
      torch::from_blob(test->labels.data(), {test->count}, torch::kUInt8).to(torch::kInt64);
  torch::NoGradGuard no_grad;
  const double accuracy =
      served.forward({x}).toTensor().argmax(1).eq(y).sum().item<double>() / test->count;
  EXPECT_NEAR(accuracy, r->accuracy, 1e-9);
  // Nothing half-written is left beside the versions.
  for (const auto& e : std::filesystem::directory_iterator(o.export_base + "/fmnist")) {
    EXPECT_TRUE(e.path().filename() == "1" || e.path().filename() == "2") << e.path();
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("exported " + v2), std::string::npos) << lines.back();
}

TEST_F(TrainTest, TheBinaryTrainsAloneAndSaysWhatItCannotDo) {
  auto r = RunCommand({TARN_TRAIN_BINARY, "--model", "mlp", "--train_limit", "640", "--threads",
                       "1", "--export_base", dir_ + "/models"},
                      120s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_NE(r->out.find("exported version 1"), std::string::npos) << r->out;

  r = RunCommand({TARN_TRAIN_BINARY, "--data_dir", dir_ + "/nothing"}, 60s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->err.find("tarn-train: " + dir_ + "/nothing/train-images-idx3-ubyte.gz: "),
            std::string::npos)
      << r->err;

  r = RunCommand({TARN_TRAIN_BINARY, "--job_name", "ps", "--ps_hosts", "ps-0:2222"}, 60s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find("parameter-server training (ps/worker roles) is not built yet"),
            std::string::npos)
      << r->err;
}

}  // namespace
}  // namespace tarn::train
