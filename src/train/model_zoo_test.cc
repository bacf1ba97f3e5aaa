// The model zoo, export and single-process training, on the real Fashion-MNIST files.
#include "train/model_zoo.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/file.h"
#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "common/test_process.h"
#include "common/workload_process.h"
#include "train/checkpoint.h"
#include "train/flat_optimizer.h"
#include "train/idx.h"
#include "train/image_batches.h"
#include "train/local_trainer.h"
#include "train/model_export.h"
#include "train/parameter_server.h"
#include "train/ps_client.h"
#include "train/train_test_util.h"

namespace tarn::train {
namespace {

using namespace std::chrono_literals;

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
  EXPECT_EQ(
      unknown.status().message(),
      "unknown model \"resnet\" (the zoo has mlp, cnn, cnn_bn; or give the path of a TorchScript "
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
  ExpectSameAccuracy(accuracy, r->accuracy, v2 + "/model.pt");
  // Nothing half-written is left beside the versions.
  for (const auto& e : std::filesystem::directory_iterator(o.export_base + "/fmnist")) {
    EXPECT_TRUE(e.path().filename() == "1" || e.path().filename() == "2") << e.path();
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("exported " + v2), std::string::npos) << lines.back();
}

TEST_F(TrainTest, TheBinaryTrainsAloneAndNamesAMissingDataDir) {
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
}

// The parameter server's optimisers against torch.optim's on the same gradients.
TEST_F(TrainTest, FlatOptimizersMatchTorchOptim) {
  for (const std::string kind : {"adam", "sgd"}) {
    torch::manual_seed(5);
    torch::Tensor p = torch::randn({1000}).set_requires_grad(true);
    std::vector<float> flat(p.data_ptr<float>(), p.data_ptr<float>() + 1000);
    OptimizerOptions o;
    o.kind = kind;
    o.learning_rate = 0.01;
    auto mine = FlatOptimizer::Create(o, 1000);
    ASSERT_TRUE(mine.ok());
    std::unique_ptr<torch::optim::Optimizer> theirs;
    if (kind == "adam") {
      theirs = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{p},
                                                    torch::optim::AdamOptions(0.01));
    } else {
      theirs = std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{p},
                                                   torch::optim::SGDOptions(0.01).momentum(0.9));
    }
    for (int step = 0; step < 20; ++step) {
      torch::Tensor g = torch::randn({1000});
      p.mutable_grad() = g.clone();
      theirs->step();
      mine->Apply(flat.data(), g.data_ptr<float>());
    }
    torch::Tensor ours = torch::from_blob(flat.data(), {1000});
    EXPECT_TRUE(torch::allclose(ours, p.detach(), 1e-4, 1e-5))
        << kind << ": max difference " << (ours - p.detach()).abs().max().item<float>();
  }
}

TEST_F(TrainTest, TheBatchLoaderYieldsEveryBatchInOrderFromWhereItStarts) {
  ImageSet set;
  set.count = 10;
  set.rows = set.cols = 2;
  for (int i = 0; i < 10; ++i) {
    set.labels.push_back(static_cast<uint8_t>(i));
    for (int p = 0; p < 4; ++p) set.pixels.push_back(static_cast<uint8_t>(25 * i));
  }
  std::vector<int64_t> order = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  BatchLoader loader(set, order, /*first_batch=*/1, /*batch_size=*/3);
  torch::Tensor images, labels;
  std::vector<int64_t> seen;
  while (loader.Next(&images, &labels)) {
    ASSERT_EQ(images.size(0), labels.size(0));
    EXPECT_EQ(images.sizes(), (std::vector<int64_t>{labels.size(0), 1, 2, 2}));
    for (int64_t i = 0; i < labels.size(0); ++i) {
      seen.push_back(labels[i].item<int64_t>());
      EXPECT_FLOAT_EQ(images[i][0][1][1].item<float>(), 25.0f * seen.back() / 255.0f);
    }
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{6, 5, 4, 3, 2, 1, 0}));
  BatchLoader abandoned(set, order, 0, 1, {}, 1);  // destroyed with batches still to make
}

// Each augmented image is its original, flipped and shifted as drawn; the same batch of the
// same epoch is augmented the same way in every run (so a resumed run trains as the first).
TEST_F(TrainTest, TheAugmentationFlipsAndShiftsAsDrawnAndAgainTheSameForTheSameBatch) {
  constexpr int64_t kN = 200, kSide = 4;
  torch::Tensor original = torch::arange(1, kSide * kSide + 1, torch::kFloat32)
                               .reshape({1, 1, kSide, kSide})
                               .repeat({kN, 1, 1, 1});
  // What image (dy, dx, flip) of the original is: flipped first, then moved, zeros around.
  auto expected = [&](int64_t dy, int64_t dx, bool flip) {
    torch::Tensor e = torch::zeros({kSide, kSide});
    torch::Tensor src = flip ? original[0][0].flip({1}) : original[0][0];
    for (int64_t y = 0; y < kSide; ++y) {
      for (int64_t x = 0; x < kSide; ++x) {
        if (y - dy >= 0 && y - dy < kSide && x - dx >= 0 && x - dx < kSide) {
          e[y][x] = src[y - dy][x - dx];
        }
      }
    }
    return e;
  };
  torch::Tensor images = original.clone();
  std::mt19937_64 rng = AugmentationRng(7, 0, 3, 12);
  Augment({/*flip=*/true, /*shift=*/1}, rng, &images);
  std::set<std::tuple<int64_t, int64_t, bool>> drawn;
  for (int64_t i = 0; i < kN; ++i) {
    bool matched = false;
    for (int64_t dy = -1; dy <= 1 && !matched; ++dy) {
      for (int64_t dx = -1; dx <= 1 && !matched; ++dx) {
        for (bool flip : {false, true}) {
          if (torch::equal(images[i][0], expected(dy, dx, flip))) {
            drawn.insert({dy, dx, flip});
            matched = true;
            break;
          }
        }
      }
    }
    EXPECT_TRUE(matched) << "image " << i << " is no flip and shift of the original:\n"
                         << images[i][0];
  }
  EXPECT_EQ(drawn.size(), 18u) << "200 draws should have met every flip and shift";
  // The same generator again: the same batch; another batch index: another.
  torch::Tensor again = original.clone();
  rng = AugmentationRng(7, 0, 3, 12);
  Augment({true, 1}, rng, &again);
  EXPECT_TRUE(torch::equal(images, again));
  torch::Tensor other = original.clone();
  rng = AugmentationRng(7, 0, 3, 13);
  Augment({true, 1}, rng, &other);
  EXPECT_FALSE(torch::equal(images, other));
  // Nothing asked, nothing changed.
  torch::Tensor untouched = original.clone();
  Augment({}, rng, &untouched);
  EXPECT_TRUE(torch::equal(untouched, original));
}

// The independent reference: Python's torch.jit.load runs the exported version and scores
// exactly what tarn-train measured, for every zoo model (cnn_bn's in eval mode, with its
// running statistics).
TEST_F(TrainTest, PythonsTorchJitLoadRunsTheExportedModels) {
  if (kSanitized) GTEST_SKIP() << "release build only: its time is libtorch's and Python's";
  for (const std::string model : {"mlp", "cnn", "cnn_bn"}) {
    LocalTrainingOptions o;
    o.model = model;
    o.data_dir = kData;
    o.export_base = dir_ + "/" + model;
    o.train_limit = 1280;
    o.threads = 2;
    auto r = RunLocalTraining(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    SCOPED_TRACE(model);
    const std::string version = o.export_base + "/fmnist/1/model.pt";
    ExpectSameAccuracy(PythonAccuracy(version), r->accuracy, version);
  }
}

TEST_F(TrainTest, OnlyTheNewestVersionsAreKept) {
  auto mlp = MakeZooModel("mlp", 1);
  ASSERT_TRUE(mlp.ok());
  for (int i = 1; i <= 4; ++i) {
    auto v = ExportVersion(*mlp, dir_, "m", {{"step", i}}, /*keep=*/2);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, i);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/m/1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/m/2"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/m/3/model.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/m/4/meta.json"));
}

// A poller of the model directory (tarn-serve's) never sees part of a version: versions
// appear by a rename, and old ones leave by a rename (out of sight) before they are deleted.
TEST_F(TrainTest, APollerNeverSeesPartOfAVersionWhileOldOnesAreRemoved) {
  auto mlp = MakeZooModel("mlp", 1);
  ASSERT_TRUE(mlp.ok());
  const std::string base = dir_ + "/m";
  std::atomic<bool> done{false};
  std::atomic<int> looks{0};
  std::vector<std::string> partial;
  std::thread poller([&] {
    while (!done) {
      std::error_code ec;
      for (std::filesystem::directory_iterator it(base, ec), end; !ec && it != end;
           it.increment(ec)) {
        const std::string name = it->path().filename();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        // What the version holds, read through one open directory; counted only if the name
        // still leads to that directory afterwards (a version renamed away meanwhile was
        // out of sight, which is the point).
        const int fd = ::open(it->path().c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) continue;
        std::set<std::string> files;
        if (DIR* d = ::fdopendir(::dup(fd))) {
          while (dirent* e = ::readdir(d)) files.insert(e->d_name);
          ::closedir(d);
        }
        struct stat held {
        }, named{};
        const bool same = ::fstat(fd, &held) == 0 && ::stat(it->path().c_str(), &named) == 0 &&
                          held.st_ino == named.st_ino;
        ::close(fd);
        ++looks;
        if (same && (!files.count("model.pt") || !files.count("meta.json"))) {
          partial.push_back(name + ": " + std::to_string(files.size() - 2) + " entries");
        }
      }
    }
  });
  for (int i = 1; i <= 30; ++i) {
    auto v = ExportVersion(*mlp, dir_, "m", {{"step", i}}, /*keep=*/2);
    ASSERT_TRUE(v.ok());
  }
  done = true;
  poller.join();
  EXPECT_GT(looks.load(), 30);
  EXPECT_TRUE(partial.empty()) << partial.size() << " partial versions seen, e.g. "
                               << (partial.empty() ? "" : partial[0]);
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(base)) left.insert(e.path().filename());
  EXPECT_EQ(left, (std::set<std::string>{"29", "30"}));  // nothing hidden is left behind
}

}  // namespace
}  // namespace tarn::train
