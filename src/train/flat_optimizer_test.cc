// FlatOptimizer against the update rules written out by hand; the comparison with
// torch.optim's own Adam and SGD is in model_zoo_test.cc (it needs libtorch).
#include "train/flat_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tarn::train {
namespace {

TEST(FlatOptimizerTest, SgdWithMomentumAndDecay) {
  OptimizerOptions o;
  o.kind = "sgd";
  o.learning_rate = 0.5;
  o.momentum = 0.9;
  o.decay_steps = 1;
  o.decay_rate = 0.5;
  auto opt = FlatOptimizer::Create(o, 1);
  ASSERT_TRUE(opt.ok());
  float p = 1.0f;
  const float g = 1.0f;
  opt->Apply(&p, &g);  // v = 1, lr 0.5: p = 0.5
  EXPECT_FLOAT_EQ(p, 0.5f);
  EXPECT_DOUBLE_EQ(opt->LearningRate(), 0.25);
  opt->Apply(&p, &g);  // v = 1.9, lr 0.25: p = 0.5 - 0.475
  EXPECT_FLOAT_EQ(p, 0.025f);
  EXPECT_EQ(opt->steps(), 2);
}

TEST(FlatOptimizerTest, AdamsFirstStepMovesEachParameterByTheLearningRate) {
  OptimizerOptions o;
  o.learning_rate = 0.01;
  auto opt = FlatOptimizer::Create(o, 3);
  ASSERT_TRUE(opt.ok());
  float p[3] = {0, 0, 0};
  const float g[3] = {2.0f, -0.001f, 0.0f};
  opt->Apply(p, g);
  EXPECT_NEAR(p[0], -0.01f, 1e-6);  // bias-corrected m/sqrt(v) = sign(g)
  EXPECT_NEAR(p[1], 0.01f, 1e-5);
  EXPECT_FLOAT_EQ(p[2], 0.0f);
}

TEST(FlatOptimizerTest, BadOptionsAreErrors) {
  OptimizerOptions o;
  o.kind = "lamb";
  EXPECT_EQ(FlatOptimizer::Create(o, 1).status().message(),
            "optimizer \"lamb\": expected adam or sgd");
  o.kind = "sgd";
  o.learning_rate = 0;
  EXPECT_FALSE(FlatOptimizer::Create(o, 1).ok());
}

}  // namespace
}  // namespace tarn::train
