#include "backend/local_container.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "runtime/shim_runtime.h"
#include "spec/parser.h"

namespace tarn::backend {
namespace {

using namespace std::chrono_literals;

spec::Assembly Load(const std::string& example) {
  spec::ParseOptions o;
  o.user = "alice";
  auto r = spec::LoadAssemblyFile(std::string(TARN_SOURCE_DIR) + "/examples/" + example, o);
  EXPECT_TRUE(r.ok());
  return *r.assembly;
}

const spec::Component& Find(const spec::Assembly& a, const std::string& name) {
  return *std::find_if(a.components.begin(), a.components.end(),
                       [&](const spec::Component& c) { return c.name == name; });
}

LaunchContext Context() {
  LaunchContext c;
  c.state_dir = "/srv/tarn";
  c.user = "alice";
  c.bin_dir = "/opt/tarn/bin";
  c.ip = "127.42.0.5";
  c.container_id = "alice-httpd-0-1";
  c.run_as.account = {"nobody", 65534, 65534};
  return c;
}

TEST(BuildContainerSpec, HttpdExample) {
  spec::Assembly a = Load("httpd/httpd.json");
  auto s = BuildContainerSpec(a, Find(a, "httpd"), 0, {}, Context());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->id, "alice/httpd-service/httpd-0");
  EXPECT_EQ(s->work_dir, "/srv/tarn/containers/alice/httpd-service/httpd-0");
  EXPECT_EQ(s->shim_dir, "/srv/tarn/shims/alice/httpd-service/httpd-0");
  EXPECT_EQ(s->hostname, "httpd-0.httpd-service.alice.tarn");
  EXPECT_EQ(s->cgroup, "tarn/alice/httpd-service/httpd-0");
  EXPECT_EQ(s->argv, (std::vector<std::string>{
                         "/bin/sh", "-c",
                         "/usr/bin/python3 -m http.server 8080 --bind $TARN_IP --directory conf"}));
  EXPECT_EQ(s->run_uid, 65534u);
  EXPECT_EQ(s->limits.memory_mib, 256);
  EXPECT_EQ(s->limits.vcores, 1);
  EXPECT_EQ(runtime::EnvValue(*s, "TARN_IP"), "127.42.0.5");
  EXPECT_EQ(runtime::EnvValue(*s, "TARN_PORT_HTTP"), "8080");
  EXPECT_EQ(runtime::EnvValue(*s, "TARN_SHARED_DIR"), "/srv/tarn/shared/alice/httpd-service");
  EXPECT_EQ(runtime::EnvValue(*s, "CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(runtime::EnvValue(*s, "NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_EQ(runtime::EnvValue(*s, "PATH"),
            "/opt/tarn/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(runtime::EnvValue(*s, "TF_CONFIG"), std::nullopt);
  ASSERT_EQ(s->files.size(), 1u);
  EXPECT_EQ(s->files[0].path, "conf/index.html");
  EXPECT_EQ(s->files[0].content,
            "<html><header><title>Title</title></header><body>Hello from httpd-0!</body></html>");

  auto proxy = BuildContainerSpec(a, Find(a, "httpd-proxy"), 0, {}, Context());
  ASSERT_TRUE(proxy.ok());
  ASSERT_EQ(proxy->files.size(), 1u);
  const std::string& conf = proxy->files[0].content;
  EXPECT_NE(conf.find("server httpd-0.httpd-service.alice.tarn:8080;"), std::string::npos) << conf;
  EXPECT_NE(conf.find("server httpd-1.httpd-service.alice.tarn:8080;"), std::string::npos);
  EXPECT_NE(conf.find("listen httpd-proxy-0.httpd-service.alice.tarn:8080;"), std::string::npos);
  EXPECT_NE(conf.find("proxy_pass http://backend;"), std::string::npos);  // nginx's own $-free
}

TEST(BuildContainerSpec, TrainingWorkerGetsItsGpusAndTfConfig) {
  spec::Assembly a = Load("fashion-mnist/assembly.json");
  auto s = BuildContainerSpec(a, Find(a, "worker"), 1, {2, 5}, Context());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(runtime::EnvValue(*s, "CUDA_VISIBLE_DEVICES"), "2,5");
  EXPECT_EQ(runtime::EnvValue(*s, "NVIDIA_VISIBLE_DEVICES"), "2,5");
  EXPECT_EQ(s->limits.gpu_minors, (std::vector<int>{2, 5}));
  EXPECT_EQ(runtime::EnvValue(*s, "TF_CONFIG"),
            "{\"cluster\":{\"ps\":[\"ps-0.fmnist.alice.tarn:2222\",\"ps-1.fmnist.alice.tarn:2222\"]"
            ",\"worker\":[\"worker-0.fmnist.alice.tarn:2222\",\"worker-1.fmnist.alice.tarn:2222\"]"
            "},\"task\":{\"index\":1,\"type\":\"worker\"}}");
  EXPECT_EQ(runtime::EnvValue(*s, "OMP_NUM_THREADS"), "1");  // from the service-level env
  EXPECT_EQ(s->limits.memory_mib, 2048);
}

// ${<INSTANCE>_IP} is the address the backend holds for that instance, in the command, the
// environment and templates; one that holds none yet fails the start with the reason
// instead of reaching the shell as written.
TEST(BuildContainerSpec, PeersAddressesAreSubstitutedOrTheStartSaysWhyNot) {
  spec::ParseResult parsed =
      spec::ParseAssembly(R"({"name": "ips", "version": "1", "components": [
    {"name": "ps", "number_of_containers": 2, "launch_command": "sleep 100",
     "resource": {"cpus": 1, "memory": "64"}},
    {"name": "web", "number_of_containers": 1, "dependencies": ["ps"],
     "launch_command": "serve --ps ${PS-0_IP}:2222 --me ${WEB-0_IP}",
     "resource": {"cpus": 1, "memory": "64"},
     "configuration": {"env": {"PS_ADDR": "${PS-0_IP}"},
       "files": [{"type": "TEMPLATE", "dest_file": "peers.txt",
                  "properties": {"content": "ps=${PS-0_IP} other=${PS-1_IP}"}}]}}]})",
                          spec::DocumentFormat::kJson, {"alice", "tarn", {}, ""});
  ASSERT_TRUE(parsed.ok());
  const spec::Assembly& a = *parsed.assembly;
  ASSERT_EQ(a.components.size(), 2u);
  LaunchContext ctx = Context();
  std::map<std::string, std::string> placed = {{"ps-0", "127.42.0.2"}, {"ps-1", "127.42.0.3"}};
  ctx.peer_address = [&](const std::string& peer) {
    auto it = placed.find(peer);
    return it == placed.end() ? std::string() : it->second;
  };
  auto s = BuildContainerSpec(a, a.components[1], 0, {}, ctx);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->argv.back(), "serve --ps 127.42.0.2:2222 --me 127.42.0.5");
  EXPECT_EQ(runtime::EnvValue(*s, "PS_ADDR"), "127.42.0.2");
  ASSERT_EQ(s->files.size(), 1u);
  EXPECT_EQ(s->files[0].content, "ps=127.42.0.2 other=127.42.0.3");

  placed.erase("ps-1");
  auto waiting = BuildContainerSpec(a, a.components[1], 0, {}, ctx);
  ASSERT_FALSE(waiting.ok());
  EXPECT_NE(
      waiting.status().message().find("${PS-1_IP}: that instance has no address yet (not placed)"),
      std::string::npos)
      << waiting.status().ToString();
}

TEST(BuildContainerSpec, AnAssemblysOwnPathWins) {
  auto parsed = spec::ParseAssembly(R"({"name": "p", "version": "1", "components": [{
      "name": "c", "number_of_containers": 1, "launch_command": "true",
      "resource": {"cpus": 1, "memory": "64"},
      "configuration": {"env": {"PATH": "/opt/mine/bin"}}}]})",
                                    spec::DocumentFormat::kJson, {"alice", "tarn", {}, ""});
  ASSERT_TRUE(parsed.ok());
  auto s = BuildContainerSpec(*parsed.assembly, parsed.assembly->components[0], 0, {}, Context());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(std::count_if(s->env.begin(), s->env.end(),
                          [](const std::string& e) { return e.rfind("PATH=", 0) == 0; }),
            1);
  EXPECT_EQ(runtime::EnvValue(*s, "PATH"), "/opt/mine/bin");
  EXPECT_EQ(runtime::EnvValue(*s, "HOME"), "/srv/tarn/containers/alice/p/c-0");
}

TEST(BuildContainerSpec, LongNamesFallBackToTheShortHostname) {
  EXPECT_EQ(ContainerHostname(std::string(64, 'a'), "w-0"), std::string(64, 'a'));
  EXPECT_EQ(ContainerHostname(std::string(65, 'a'), "w-0"), "w-0");
}

TEST(BuildContainerSpec, DockerArtifactsRunTheImage) {
  auto parsed = spec::ParseAssembly(R"({"name": "tfs", "version": "1", "components": [{
      "name": "serving", "number_of_containers": 1,
      "artifact": {"id": "tensorflow/serving:2.14.0", "type": "DOCKER"},
      "resource": {"cpus": 2, "memory": "1Gi"},
      "configuration": {"files": [{"type": "PROPERTIES", "dest_file": "/etc/tfs/x.properties",
                                   "properties": {"model": "${SERVICE_NAME}"}}]}}]})",
                                    spec::DocumentFormat::kJson, {"alice", "tarn", {}, ""});
  ASSERT_TRUE(parsed.ok());
  auto s = BuildContainerSpec(*parsed.assembly, parsed.assembly->components[0], 0, {}, Context());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->image, "tensorflow/serving:2.14.0");
  EXPECT_TRUE(s->argv.empty());  // the image's own command
  EXPECT_EQ(s->files[0].path, "conf/abs/etc/tfs/x.properties");
  EXPECT_EQ(s->files[0].content, "model=tfs\n");
  EXPECT_EQ(s->bind_paths,
            (std::vector<std::string>{
                "/srv/tarn/containers/alice/tfs/serving-0", "/srv/tarn/shared/alice/tfs",
                "/srv/tarn/containers/alice/tfs/serving-0/conf/abs/etc/tfs/x.properties:/etc/"
                "tfs/x.properties"}));
}

// From an assembly file to a running, isolated container and back: the whole local path.
TEST(BuildContainerSpec, RunsForRealUnderTheShim) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  char tmpl[] = "/tmp/tarn-backend-test-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0755);
  auto parsed = spec::ParseAssembly(R"yaml(
name: hello
version: "1"
components:
  - name: greeter
    number_of_containers: 1
    launch_command: cat conf/greeting.txt; echo " $GREETING $TARN_INSTANCE $(hostname) $(id -u)"
    resource: {cpus: 1, memory: 64Mi}
    configuration:
      env: {GREETING: "from ${SERVICE_NAME}"}
      files:
        - {type: TEMPLATE, dest_file: greeting.txt, properties: {content: "hi ${COMPONENT_INSTANCE_NAME}"}}
)yaml",
                                    spec::DocumentFormat::kYaml, {"alice", "tarn", {}, ""});
  ASSERT_TRUE(parsed.ok());
  LaunchContext ctx = Context();
  ctx.state_dir = dir;
  auto s = BuildContainerSpec(*parsed.assembly, parsed.assembly->components[0], 0, {}, ctx);
  ASSERT_TRUE(s.ok());
  s->cgroup = "tarn-test-" + std::to_string(::getpid()) + "/greeter-0";
  runtime::ShimRuntime rt({TARN_SHIM_BINARY});
  ASSERT_TRUE(rt.Start(*s).ok());
  auto done = rt.Wait(s->shim_dir, 20s);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->diagnostics, "exited with code 0");
  std::ifstream out(s->shim_dir + "/stdout.log");
  std::stringstream text;
  text << out.rdbuf();
  EXPECT_EQ(text.str(), "hi greeter-0 from hello greeter-0 greeter-0.hello.alice.tarn 65534\n");
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace tarn::backend
