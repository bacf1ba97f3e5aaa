#include "spec/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/diagnostic_checks_for_test.h"
#include "spec/parser.h"

namespace tarn::spec {
namespace {

using json = nlohmann::json;
using Env = std::map<std::string, std::string>;

// Parses YAML that must be valid and returns the assembly (or an empty one after a failure).
Assembly MustParse(std::string_view yaml) {
  ParseOptions o;
  o.user = "alice";
  o.domain = "tarn";
  ParseResult r = ParseAssembly(yaml, DocumentFormat::kYaml, o);
  EXPECT_TRUE(r.ok()) << Dump(r);
  return r.ok() ? *r.assembly : Assembly{};
}

const InstancePlan* Find(const Plan& p, std::string_view name) {
  for (const InstancePlan& i : p.instances) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

Env EnvOf(const InstancePlan& i) { return Env(i.env.begin(), i.env.end()); }

// A TensorFlow job: ps, 2 workers, a chief and a TensorBoard that is not part of it.
constexpr char kTraining[] = R"(
name: fmnist
version: "1"
resource:
  cpus: 2
  memory: 1Gi
configuration:
  env:
    ME: ${COMPONENT_INSTANCE_NAME}
    ID: ${COMPONENT_ID}
    PEER: ${WORKER-1_HOST}
    PS_IP: ${PS-0_IP}
components:
  - name: ps
    number_of_containers: 1
    launch_command: python ps.py
    configuration:
      properties:
        tarn.tf.role: ps
        tarn.tf.port: 2222
  - name: worker
    number_of_containers: 2
    launch_command: python train.py --task ${COMPONENT_ID} --host ${THIS_HOST}
    dependencies: [ps]
    readiness_check:
      type: HTTP
      properties:
        url: http://${THIS_HOST}:8501/v1/models/fmnist
    configuration:
      properties:
        tarn.tf.role: worker
        tarn.ports: grpc:2222,http-api:8501
  - name: chief
    number_of_containers: 1
    launch_command: python chief.py
    configuration:
      properties:
        tarn.tf.role: chief
        tarn.ports: grpc:3333
  - name: tensorboard
    number_of_containers: 1
    launch_command: tensorboard --logdir /tmp/logs
    dependencies: [worker]
    resource:
      cpus: 1
      memory: 512
      additional:
        yarn.io/gpu:
          value: 1
)";

TEST(PlanTest, WavesAndInstanceOrder) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  EXPECT_EQ(p.waves,
            (std::vector<std::vector<std::string>>{{"ps", "chief"}, {"worker"}, {"tensorboard"}}));
  std::vector<std::string> names;
  for (const InstancePlan& i : p.instances) names.push_back(i.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"ps-0", "chief-0", "worker-0", "worker-1", "tensorboard-0"}));
}

TEST(PlanTest, WavesKeepDeclarationOrderWithinAWave) {
  Assembly a = MustParse(R"(
name: app
version: "1"
resource: {cpus: 1, memory: 256}
components:
  - {name: c, number_of_containers: 1, launch_command: x, dependencies: [a]}
  - {name: a, number_of_containers: 1, launch_command: x}
  - {name: b, number_of_containers: 0, launch_command: x, dependencies: [a]}
  - {name: d, number_of_containers: 1, launch_command: x, dependencies: [c, b]}
  - {name: e, number_of_containers: 1, launch_command: x}
)");
  Plan p = MakePlan(a, "alice", "tarn");
  EXPECT_EQ(p.waves, (std::vector<std::vector<std::string>>{{"a", "e"}, {"c", "b"}, {"d"}}));
  std::vector<std::string> names;
  for (const InstancePlan& i : p.instances) names.push_back(i.name);
  // b has no containers: it is in its wave but starts nothing.
  EXPECT_EQ(names, (std::vector<std::string>{"a-0", "e-0", "c-0", "d-0"}));
  EXPECT_TRUE(p.gang.empty());  // no tf roles
}

TEST(PlanTest, GangListsRoleComponents) {
  Assembly a = MustParse(kTraining);
  EXPECT_TRUE(a.gang);
  Plan p = MakePlan(a, "alice", "tarn");
  EXPECT_EQ(p.gang, (std::vector<std::string>{"ps", "worker", "chief"}));
}

TEST(PlanTest, GangIsEmptyWhenTurnedOff) {
  std::string text = kTraining;
  text.replace(text.find("configuration:\n  env:"), 0,
               "configuration:\n  properties:\n    tarn.gang: \"false\"\n");
  // Two top-level "configuration:" keys would be a duplicate; merge them instead.
  text.replace(text.find("\nconfiguration:\n  env:"), 22, "\n  env:");
  Assembly a = MustParse(text);
  EXPECT_FALSE(a.gang);
  Plan p = MakePlan(a, "alice", "tarn");
  EXPECT_TRUE(p.gang.empty());
  EXPECT_EQ(p.instances.size(), 5u);
}

TEST(PlanTest, TfConfigIsWhatTensorFlowReads) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  const json cluster = {
      {"chief", {"chief-0.fmnist.alice.tarn:3333"}},
      {"ps", {"ps-0.fmnist.alice.tarn:2222"}},
      {"worker", {"worker-0.fmnist.alice.tarn:2222", "worker-1.fmnist.alice.tarn:2222"}},
  };
  struct Case {
    const char* instance;
    const char* type;
    int index;
  };
  for (const Case& c : {Case{"ps-0", "ps", 0}, Case{"worker-0", "worker", 0},
                        Case{"worker-1", "worker", 1}, Case{"chief-0", "chief", 0}}) {
    const InstancePlan* inst = Find(p, c.instance);
    ASSERT_NE(inst, nullptr) << c.instance;
    Env env = EnvOf(*inst);
    ASSERT_EQ(env.count("TF_CONFIG"), 1u) << c.instance;
    json got = json::parse(env.at("TF_CONFIG"));
    json want = {{"cluster", cluster}, {"task", {{"type", c.type}, {"index", c.index}}}};
    EXPECT_EQ(got, want) << c.instance << ": " << env.at("TF_CONFIG");
    EXPECT_TRUE(got["task"]["index"].is_number_integer());
  }
}

TEST(PlanTest, NonRoleComponentsGetNoTfConfig) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  const InstancePlan* tb = Find(p, "tensorboard-0");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(EnvOf(*tb).count("TF_CONFIG"), 0u);
  EXPECT_EQ(TfConfigJson(a, a.components[3], 0, "alice", "tarn"), "");
}

TEST(PlanTest, TfConfigJsonDirectly) {
  Assembly a = MustParse(kTraining);
  json got = json::parse(TfConfigJson(a, a.components[0], 0, "bob", "ml.example.com"));
  json want = json::parse(R"({
    "cluster": {
      "chief": ["chief-0.fmnist.bob.ml.example.com:3333"],
      "ps": ["ps-0.fmnist.bob.ml.example.com:2222"],
      "worker": ["worker-0.fmnist.bob.ml.example.com:2222",
                 "worker-1.fmnist.bob.ml.example.com:2222"]
    },
    "task": {"type": "ps", "index": 0}
  })");
  EXPECT_EQ(got, want);
}

TEST(PlanTest, EnvOfAWorker) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  const InstancePlan* w1 = Find(p, "worker-1");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->component, "worker");
  EXPECT_EQ(w1->index, 1);
  EXPECT_EQ(w1->hostname, "worker-1.fmnist.alice.tarn");
  EXPECT_EQ(w1->command, "python train.py --task 1 --host worker-1.fmnist.alice.tarn");
  EXPECT_TRUE(std::is_sorted(w1->env.begin(), w1->env.end()));
  Env env = EnvOf(*w1);
  EXPECT_EQ(env.size(), w1->env.size());  // no name twice
  env.erase("TF_CONFIG");                 // checked above
  EXPECT_EQ(env, (Env{
                     {"ID", "1"},
                     {"ME", "worker-1"},
                     {"PEER", "worker-1.fmnist.alice.tarn"},
                     {"PS_IP", "${PS-0_IP}"},  // known only once ps-0 is placed
                     {"TARN_ASSEMBLY", "fmnist"},
                     {"TARN_COMPONENT", "worker"},
                     {"TARN_DOMAIN", "tarn"},
                     {"TARN_HOSTNAME", "worker-1.fmnist.alice.tarn"},
                     {"TARN_INDEX", "1"},
                     {"TARN_INSTANCE", "worker-1"},
                     {"TARN_MEMORY_MB", "1024"},
                     {"TARN_PORT_GRPC", "2222"},
                     {"TARN_PORT_HTTP_API", "8501"},
                     {"TARN_USER", "alice"},
                     {"TARN_VCORES", "2"},
                 }));
}

TEST(PlanTest, EnvIsSubstitutedPerInstance) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  for (const auto& [name, me, id] :
       {std::tuple{"ps-0", "ps-0", "0"}, std::tuple{"worker-0", "worker-0", "0"},
        std::tuple{"worker-1", "worker-1", "1"},
        std::tuple{"tensorboard-0", "tensorboard-0", "0"}}) {
    const InstancePlan* inst = Find(p, name);
    ASSERT_NE(inst, nullptr) << name;
    Env env = EnvOf(*inst);
    EXPECT_EQ(env["ME"], me) << name;
    EXPECT_EQ(env["ID"], id) << name;
    EXPECT_EQ(env["TARN_INDEX"], id) << name;
  }
  EXPECT_EQ(Find(p, "worker-0")->command,
            "python train.py --task 0 --host worker-0.fmnist.alice.tarn");
}

TEST(PlanTest, TensorboardEnvHasItsOwnResources) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  Env env = EnvOf(*Find(p, "tensorboard-0"));
  EXPECT_EQ(env["TARN_VCORES"], "1");
  EXPECT_EQ(env["TARN_MEMORY_MB"], "512");
  for (const auto& [k, v] : env) EXPECT_NE(k.rfind("TARN_PORT_", 0), 0u) << k;
}

TEST(PlanTest, PortEnvNamesAreUppercaseWithUnderscores) {
  Assembly a = MustParse(R"(
name: serve
version: "1"
components:
  - name: model
    number_of_containers: 1
    launch_command: serve
    resource: {cpus: 1, memory: 256}
    configuration:
      properties:
        tarn.ports: grpc-web:8080,http:8501,metrics-2:9090
)");
  Plan p = MakePlan(a, "alice", "tarn");
  ASSERT_EQ(p.instances.size(), 1u);
  Env env = EnvOf(p.instances[0]);
  EXPECT_EQ(env["TARN_PORT_GRPC_WEB"], "8080");
  EXPECT_EQ(env["TARN_PORT_HTTP"], "8501");
  EXPECT_EQ(env["TARN_PORT_METRICS_2"], "9090");
  EXPECT_EQ(env.count("TARN_PORT_GRPC-WEB"), 0u);
  EXPECT_EQ(env.count("TF_CONFIG"), 0u);
}

TEST(PlanTest, EnvAtLaunchHasGpuVariablesOnlyWithGpus) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  const std::vector<std::string> base = {"TARN_IP", "TARN_SHARED_DIR", "TARN_CONTAINER_ID",
                                        "TARN_ASSEMBLY_SECRET"};
  auto has = [](const InstancePlan& i, const std::string& name) {
    return std::find(i.env_at_launch.begin(), i.env_at_launch.end(), name) != i.env_at_launch.end();
  };
  for (const InstancePlan& i : p.instances) {
    for (const std::string& name : base) EXPECT_TRUE(has(i, name)) << i.name << " " << name;
    const bool gpu = i.component == "tensorboard";
    EXPECT_EQ(has(i, "CUDA_VISIBLE_DEVICES"), gpu) << i.name;
    EXPECT_EQ(has(i, "NVIDIA_VISIBLE_DEVICES"), gpu) << i.name;
    // Values that exist only at launch are not given a value in the plan.
    Env env = EnvOf(i);
    EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u) << i.name;
    EXPECT_EQ(env.count("TARN_IP"), 0u) << i.name;
  }
}

TEST(PlanTest, ZeroGpusMeansNoGpuVariables) {
  Assembly a = MustParse(R"(
name: app
version: "1"
components:
  - name: cpu-only
    number_of_containers: 1
    launch_command: x
    resource:
      cpus: 1
      memory: 256
      additional:
        yarn.io/gpu: {value: 0}
)");
  Plan p = MakePlan(a, "alice", "tarn");
  ASSERT_EQ(p.instances.size(), 1u);
  const auto& launch = p.instances[0].env_at_launch;
  EXPECT_EQ(std::count(launch.begin(), launch.end(), "CUDA_VISIBLE_DEVICES"), 0);
}

TEST(PlanTest, ReadinessPropertiesAreSubstitutedPerInstance) {
  Assembly a = MustParse(kTraining);
  Plan p = MakePlan(a, "alice", "tarn");
  const InstancePlan* w1 = Find(p, "worker-1");
  ASSERT_NE(w1, nullptr);
  ASSERT_TRUE(w1->readiness_check.has_value());
  EXPECT_EQ(w1->readiness_check->type, ReadinessType::kHttp);
  EXPECT_EQ(w1->readiness_check->properties.at("url"),
            "http://worker-1.fmnist.alice.tarn:8501/v1/models/fmnist");
  EXPECT_FALSE(Find(p, "ps-0")->readiness_check.has_value());
}

TEST(PlanTest, TfPortDefaultsToFirstOfTarnPorts) {
  Assembly a = MustParse(kTraining);
  ASSERT_EQ(a.components.size(), 4u);
  EXPECT_EQ(a.components[1].name, "worker");
  EXPECT_EQ(a.components[1].tf_port, 2222);  // grpc:2222 is first
  EXPECT_EQ(a.components[2].tf_port, 3333);
  EXPECT_EQ(a.components[0].tf_port, 2222);  // tarn.tf.port

  Assembly b = MustParse(R"(
name: app
version: "1"
components:
  - name: worker
    number_of_containers: 1
    launch_command: x
    resource: {cpus: 1, memory: 256}
    configuration:
      properties:
        tarn.tf.role: worker
        tarn.ports: http:8501,grpc:2222
)");
  ASSERT_EQ(b.components.size(), 1u);
  EXPECT_EQ(b.components[0].tf_port, 8501);
  json tf = json::parse(TfConfigJson(b, b.components[0], 0, "alice", "tarn"));
  EXPECT_EQ(tf["cluster"]["worker"], json({"worker-0.app.alice.tarn:8501"}));
}

TEST(PlanTest, ComponentsWithoutContainersAreLeftOutOfTheCluster) {
  Assembly a = MustParse(R"(
name: app
version: "1"
resource: {cpus: 1, memory: 256}
components:
  - name: chief
    number_of_containers: 0
    launch_command: x
    configuration: {properties: {tarn.tf.role: chief, tarn.tf.port: 1000}}
  - name: worker
    number_of_containers: 1
    launch_command: x
    configuration: {properties: {tarn.tf.role: worker, tarn.tf.port: 2000}}
)");
  json tf = json::parse(TfConfigJson(a, a.components[1], 0, "u", "d"));
  EXPECT_EQ(tf, json::parse(R"({"cluster": {"worker": ["worker-0.app.u.d:2000"]},
                                "task": {"type": "worker", "index": 0}})"));
}

}  // namespace
}  // namespace tarn::spec
