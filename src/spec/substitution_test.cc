#include "spec/substitution.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tarn::spec {
namespace {

using Names = std::vector<std::string>;

TEST(SubstituteTest, KnownNamesAreReplaced) {
  Variables v;
  v.Set("A", "1");
  v.Set("LONG_NAME", "value");
  Expansion e = Substitute("x${A}y ${LONG_NAME}${A}", v);
  EXPECT_EQ(e.text, "x1y value1");
  EXPECT_TRUE(e.unknown.empty());
}

TEST(SubstituteTest, NoVariables) {
  Variables v;
  EXPECT_EQ(Substitute("", v).text, "");
  EXPECT_EQ(Substitute("plain text", v).text, "plain text");
  EXPECT_TRUE(Substitute("plain text", v).unknown.empty());
}

TEST(SubstituteTest, DeferredNamesStayAndAreNotUnknown) {
  Variables v;
  v.Defer("CONTAINER_ID");
  Expansion e = Substitute("id=${CONTAINER_ID}", v);
  EXPECT_EQ(e.text, "id=${CONTAINER_ID}");
  EXPECT_TRUE(e.unknown.empty());
}

TEST(SubstituteTest, UnknownNamesStayAndAreListed) {
  Variables v;
  v.Set("A", "1");
  Expansion e = Substitute("${NOPE} ${A} ${ALSO_NOPE} ${NOPE}", v);
  EXPECT_EQ(e.text, "${NOPE} 1 ${ALSO_NOPE} ${NOPE}");
  EXPECT_EQ(e.unknown, (Names{"NOPE", "ALSO_NOPE", "NOPE"}));
}

TEST(SubstituteTest, ValuesAreNotExpandedAgain) {
  Variables v;
  v.Set("A", "${B}");
  v.Set("B", "b");
  Expansion e = Substitute("${A}", v);
  EXPECT_EQ(e.text, "${B}");
  EXPECT_TRUE(e.unknown.empty());
}

TEST(SubstituteTest, UnterminatedIsLeftAsIs) {
  Variables v;
  v.Set("A", "1");
  Expansion e = Substitute("a ${A} ${B", v);
  EXPECT_EQ(e.text, "a 1 ${B");
  EXPECT_TRUE(e.unknown.empty());
  EXPECT_EQ(Substitute("${", v).text, "${");
  EXPECT_EQ(Substitute("tail $", v).text, "tail $");
}

TEST(SubstituteTest, DollarWithoutBracesIsUntouched) {
  Variables v;
  v.Set("HOME", "/should/not/appear");
  Expansion e = Substitute("cd $HOME && echo $ {HOME} $$", v);
  EXPECT_EQ(e.text, "cd $HOME && echo $ {HOME} $$");
  EXPECT_TRUE(e.unknown.empty());
}

Variables WithInstances() {
  Variables v;
  v.AddInstances("worker", 2);
  v.AddInstances("ps", 1);
  v.SetNameSuffix(".app.alice.tarn");
  return v;
}

TEST(VariablesTest, InstanceHostResolvesOnlyForExistingIndices) {
  Variables v = WithInstances();
  EXPECT_EQ(v.Find("WORKER-0_HOST"), std::optional<std::string>("worker-0.app.alice.tarn"));
  EXPECT_EQ(v.Find("WORKER-1_HOST"), std::optional<std::string>("worker-1.app.alice.tarn"));
  EXPECT_EQ(v.Find("WORKER-2_HOST"), std::nullopt);
  EXPECT_EQ(v.Find("PS-0_HOST"), std::optional<std::string>("ps-0.app.alice.tarn"));
  EXPECT_EQ(v.Find("PS-1_HOST"), std::nullopt);
  EXPECT_EQ(v.Find("CHIEF-0_HOST"), std::nullopt);
  EXPECT_EQ(v.Find("WORKER-01_HOST"), std::nullopt);  // no leading zeros
  EXPECT_EQ(v.Find("WORKER-_HOST"), std::nullopt);
  EXPECT_EQ(v.Find("WORKER_HOST"), std::nullopt);
  EXPECT_EQ(v.Find("worker-0_HOST"), std::nullopt);  // YARN writes the component in uppercase

  Expansion e = Substitute("--peer=${WORKER-1_HOST} --x=${WORKER-2_HOST}", v);
  EXPECT_EQ(e.text, "--peer=worker-1.app.alice.tarn --x=${WORKER-2_HOST}");
  EXPECT_EQ(e.unknown, (Names{"WORKER-2_HOST"}));
}

TEST(VariablesTest, InstanceIpIsDeferredForExistingIndices) {
  Variables v = WithInstances();
  EXPECT_TRUE(v.IsDeferred("PS-0_IP"));
  EXPECT_FALSE(v.IsDeferred("PS-1_IP"));
  EXPECT_TRUE(v.IsDeferred("WORKER-1_IP"));
  EXPECT_EQ(v.Find("PS-0_IP"), std::nullopt);
  Expansion e = Substitute("${PS-0_IP} ${PS-1_IP}", v);
  EXPECT_EQ(e.text, "${PS-0_IP} ${PS-1_IP}");
  EXPECT_EQ(e.unknown, (Names{"PS-1_IP"}));
}

TEST(VariablesTest, InstanceIpIsTheAddressTheLookupHolds) {
  Variables v;
  v.AddInstances("PS", 2);
  v.SetAddressLookup([](const std::string& instance) {
    return instance == "ps-0" ? std::string("127.42.0.2") : std::string();
  });
  EXPECT_EQ(v.Find("PS-0_IP"), "127.42.0.2");
  EXPECT_EQ(v.Find("PS-1_IP"), std::nullopt);  // not placed yet: deferred
  EXPECT_EQ(v.AddressOf("PS-1_IP"), "ps-1");
  EXPECT_EQ(v.AddressOf("PS-2_IP"), std::nullopt);
  Expansion e = Substitute("--ps ${PS-0_IP}:2222 --backup ${PS-1_IP} ${NOPE}", v);
  EXPECT_EQ(e.text, "--ps 127.42.0.2:2222 --backup ${PS-1_IP} ${NOPE}");
  EXPECT_EQ(e.deferred, (Names{"PS-1_IP"}));
  EXPECT_EQ(e.unknown, (Names{"NOPE"}));
  EXPECT_EQ(UnresolvedAddresses(e.text, v), (Names{"ps-1"}));
  EXPECT_TRUE(UnresolvedAddresses("--ps 127.42.0.2 ${CONTAINER_ID}", v).empty());
}

TEST(VariablesTest, ComponentNamesWithHyphens) {
  Variables v;
  v.AddInstances("my-worker", 3);
  v.SetNameSuffix(".a.u.d");
  EXPECT_EQ(v.Find("MY-WORKER-2_HOST"), std::optional<std::string>("my-worker-2.a.u.d"));
  EXPECT_EQ(v.Find("MY-WORKER-3_HOST"), std::nullopt);
}

TEST(VariablesTest, SetValueWinsOverInstanceLookup) {
  Variables v = WithInstances();
  v.Set("WORKER-0_HOST", "pinned");
  EXPECT_EQ(v.Find("WORKER-0_HOST"), std::optional<std::string>("pinned"));
}

TEST(NamesTest, InstanceNameAndHostname) {
  EXPECT_EQ(InstanceName("worker", 0), "worker-0");
  EXPECT_EQ(InstanceName("worker", 12), "worker-12");
  EXPECT_EQ(InstanceHostname("worker-0", "fmnist", "alice", "tarn"), "worker-0.fmnist.alice.tarn");
  EXPECT_EQ(InstanceHostname("ps-1", "a", "u", "ml.example.com"), "ps-1.a.u.ml.example.com");
}

Assembly TwoComponents() {
  Assembly a;
  a.name = "fmnist";
  Component ps;
  ps.name = "ps";
  ps.number_of_containers = 1;
  Component worker;
  worker.name = "worker";
  worker.number_of_containers = 3;
  a.components = {ps, worker};
  return a;
}

TEST(AssemblyVariablesTest, SharedValues) {
  Assembly a = TwoComponents();
  Variables v = AssemblyVariables(a, "alice", "tarn");
  Expansion e = Substitute(
      "${SERVICE_NAME} ${SERVICE_NAME.lc} ${USER} ${DOMAIN} ${CLUSTER_FS_URI} ${PS-0_HOST} "
      "${WORKER-2_HOST}",
      v);
  EXPECT_EQ(e.text,
            "fmnist fmnist alice tarn file:/// ps-0.fmnist.alice.tarn "
            "worker-2.fmnist.alice.tarn");
  EXPECT_TRUE(e.unknown.empty());
  EXPECT_TRUE(v.IsDeferred("WORKER-2_IP"));
  EXPECT_FALSE(v.IsDeferred("WORKER-3_IP"));
}

TEST(AssemblyVariablesTest, ServiceNameLcIsLowercase) {
  Assembly a = TwoComponents();
  a.name = "FMnist";  // not a valid assembly name, but the variable must still lowercase it
  Variables v = AssemblyVariables(a, "alice", "tarn");
  EXPECT_EQ(Substitute("${SERVICE_NAME}/${SERVICE_NAME.lc}", v).text, "FMnist/fmnist");
}

TEST(InstanceVariablesTest, PerInstanceValues) {
  Assembly a = TwoComponents();
  Variables base = AssemblyVariables(a, "alice", "tarn");
  Variables v = InstanceVariables(base, a, a.components[1], 2, "alice", "tarn");
  Expansion e = Substitute(
      "${COMPONENT_NAME} ${COMPONENT_NAME.lc} ${COMPONENT_INSTANCE_NAME} ${COMPONENT_ID} "
      "${THIS_HOST} ${CONTAINER_ID} ${SERVICE_HDFS_DIR}",
      v);
  EXPECT_EQ(e.text,
            "worker worker worker-2 2 worker-2.fmnist.alice.tarn ${CONTAINER_ID} "
            "${SERVICE_HDFS_DIR}");
  EXPECT_TRUE(e.unknown.empty());

  // Index 0 of the other component: COMPONENT_ID is the index, not a global number.
  Variables v0 = InstanceVariables(base, a, a.components[0], 0, "alice", "tarn");
  EXPECT_EQ(Substitute("${COMPONENT_INSTANCE_NAME}:${COMPONENT_ID}", v0).text, "ps-0:0");
  // The base is copied, not changed.
  EXPECT_EQ(base.Find("COMPONENT_ID"), std::nullopt);
}

TEST(UnknownVariableHintTest, Hints) {
  EXPECT_NE(UnknownVariableHint("CLUSTER_ZK_QUORUM").find("ZooKeeper"), std::string::npos);
  EXPECT_NE(UnknownVariableHint("SERVICE_ZK_PATH").find("ZooKeeper"), std::string::npos);
  EXPECT_NE(UnknownVariableHint("CLUSTER_FS_HOST").find("local"), std::string::npos);
  EXPECT_NE(UnknownVariableHint("WORKER-9_HOST").find("no instance of that name"),
            std::string::npos);
  EXPECT_NE(UnknownVariableHint("WORKER-9_IP").find("no instance of that name"), std::string::npos);
  EXPECT_EQ(UnknownVariableHint("FOO"), "");
  EXPECT_EQ(UnknownVariableHint("_HOST"), "");
}

}  // namespace
}  // namespace tarn::spec
