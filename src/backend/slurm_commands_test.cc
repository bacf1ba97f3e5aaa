#include "backend/slurm_commands.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tarn::backend {
namespace {

// Jobs as squeue --json (Slurm 22.05.8) printed them here, trimmed to the fields read.
constexpr char kSqueue[] = R"json({"meta": {}, "errors": [], "jobs": [
  {"job_id": 101, "name": "tarn.alice.a.w-0.1", "job_state": "RUNNING", "state_reason": "None",
   "nodes": "node1", "exit_code": 0, "derived_exit_code": 0, "end_time": 1827577849,
   "gres_detail": ["gpu:1(IDX:0)"]
},
  {"job_id": 102, "name": "t2", "job_state": "FAILED", "state_reason": "NonZeroExitCode",
   "nodes": "node1", "exit_code": 768, "derived_exit_code": 0, "end_time": 1796041849},
  {"job_id": 103, "name": "t3", "job_state": "PENDING", "state_reason": "Resources",
   "nodes": "", "exit_code": 0, "derived_exit_code": 0, "end_time": 6122545085}]})json";

TEST(SlurmCommandsTest, ParsesSqueueJson) {
  auto jobs = ParseSqueueJson(kSqueue);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].job_id, 101);
  EXPECT_EQ((*jobs)[0].name, "tarn.alice.a.w-0.1");
  EXPECT_EQ((*jobs)[0].state, "RUNNING");
  EXPECT_EQ((*jobs)[1].exit_code, 768);
  EXPECT_EQ((*jobs)[2].reason, "Resources");

  auto bad = ParseSqueueJson("squeue: error: Unable to contact slurm controller");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("squeue --json"), std::string::npos);
  auto errors = ParseSqueueJson(R"({"errors": [{"error": "Invalid user"}], "jobs": []})");
  ASSERT_FALSE(errors.ok());
  EXPECT_EQ(errors.status().message(), "squeue: Invalid user");
}

SlurmJob Job(const std::string& state, const std::string& reason, int64_t exit_code,
             int64_t derived = 0) {
  SlurmJob j;
  j.job_id = 7;
  j.state = state;
  j.reason = reason;
  j.exit_code = exit_code;
  j.derived_exit_code = derived;
  j.end_time = 1700000000;
  return j;
}

TEST(SlurmCommandsTest, MapsJobStatesToTarn) {
  JobView v = ViewJob(Job("PENDING", "Resources", 0));
  EXPECT_EQ(v.phase, JobView::Phase::kPending);
  EXPECT_EQ(v.detail, "Slurm: PENDING (Resources)");
  EXPECT_EQ(ViewJob(Job("RUNNING", "None", 0)).phase, JobView::Phase::kRunning);
  EXPECT_EQ(ViewJob(Job("COMPLETING", "None", 0)).phase, JobView::Phase::kRunning);

  v = ViewJob(Job("FAILED", "NonZeroExitCode", 768));
  ASSERT_EQ(v.phase, JobView::Phase::kEnded);
  EXPECT_EQ(v.exit.exit_code, 3);
  EXPECT_EQ(v.exit.signal, 0);
  EXPECT_FALSE(v.exit.oom_killed);
  EXPECT_EQ(v.exit.diagnostics, "Slurm: FAILED (NonZeroExitCode), exited with code 3");
  EXPECT_EQ(v.exit.finished_at_ms, 1700000000000);

  v = ViewJob(Job("CANCELLED", "None", 15));
  EXPECT_EQ(v.exit.signal, 15);
  EXPECT_EQ(v.exit.diagnostics, "Slurm: CANCELLED");
  EXPECT_FALSE(v.preempted);
  v = ViewJob(Job("PREEMPTED", "None", 15));
  EXPECT_EQ(v.phase, JobView::Phase::kEnded);
  EXPECT_TRUE(v.preempted);
  EXPECT_EQ(v.exit.diagnostics, "Slurm: PREEMPTED");

  v = ViewJob(Job("COMPLETED", "None", 0));
  EXPECT_EQ(v.exit.exit_code, 0);
  EXPECT_EQ(v.exit.diagnostics, "Slurm: COMPLETED, exited with code 0");

  // A node failure carries status 0: it must not read as a clean exit.
  v = ViewJob(Job("NODE_FAIL", "NodeDown", 0));
  EXPECT_EQ(v.exit.exit_code, -1);
  EXPECT_EQ(v.exit.diagnostics, "Slurm: NODE_FAIL (NodeDown)");
  EXPECT_EQ(ViewJob(Job("TIMEOUT", "TimeLimit", 0)).exit.diagnostics, "Slurm: TIMEOUT (TimeLimit)");

  v = ViewJob(Job("OUT_OF_MEMORY", "OutOfMemory", 253));
  EXPECT_TRUE(v.exit.oom_killed);
  EXPECT_EQ(v.exit.diagnostics, "Slurm: OUT_OF_MEMORY");
  // Over --mem inside an srun step: FAILED, with the OOM only in the derived exit code.
  v = ViewJob(Job("FAILED", "OutOfMemory", 256, 253));
  EXPECT_TRUE(v.exit.oom_killed);
  EXPECT_EQ(v.exit.exit_code, 1);
  EXPECT_EQ(v.exit.diagnostics,
            "Slurm: FAILED (OutOfMemory), killed: out of memory (over its --mem)");
}

TEST(SlurmCommandsTest, PriorityMapsToNiceAndAQos) {
  const std::vector<PriorityQos> table = {{0, "normal"}, {10, "urgent"}, {5, "high"}};
  SlurmPriority p = MapPriority(10, 10, table);
  EXPECT_EQ(p.nice, 0);
  EXPECT_EQ(p.qos, "urgent");
  p = MapPriority(7, 10, table);
  EXPECT_EQ(p.nice, 3);
  EXPECT_EQ(p.qos, "high");  // the highest entry at or below 7
  p = MapPriority(-3, 10, table);
  EXPECT_EQ(p.nice, 13);
  EXPECT_EQ(p.qos, "");  // below every entry: the configured QOS
  EXPECT_EQ(MapPriority(0, 0, {}).nice, 0);
  EXPECT_EQ(MapPriority(1000000000, -1000000000, {}).nice, 0) << "never negative";
  EXPECT_EQ(MapPriority(-1000000000, 1000000000, {}).nice, 2000000000);

  SbatchRequest r;
  r.job_name = "j";
  r.nice = 3;
  r.script_path = "s";
  std::vector<std::string> argv = SbatchArgv(r);
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--nice=3"), argv.end());
  r.nice = 0;
  argv = SbatchArgv(r);
  EXPECT_EQ(std::find_if(argv.begin(), argv.end(),
                         [](const std::string& a) { return a.rfind("--nice", 0) == 0; }),
            argv.end());
  r.nice = 4;
  argv = GangSbatchArgv(r, {HetComponent{}, HetComponent{}});
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--nice=4"), 2) << "once per component";
}

TEST(SlurmCommandsTest, JobNamesCarryTheStart) {
  EXPECT_EQ(JobName("alice", "fmnist", "worker-0", "alice_fmnist_worker-0_3"),
            "tarn.alice.fmnist.worker-0.3");
  EXPECT_EQ(JobName("alice", "fmnist", "worker-0", "odd"), "tarn.alice.fmnist.worker-0.odd");
}

TEST(SlurmCommandsTest, SbatchArgv) {
  SbatchRequest r;
  r.job_name = "tarn.alice.a.w-0.1";
  r.cpus = 2;
  r.memory_mib = 512;
  r.stdout_path = "/s/o";
  r.stderr_path = "/s/e";
  r.script_path = "/s/job.sh";
  EXPECT_EQ(SbatchArgv(r),
            (std::vector<std::string>{"sbatch", "--parsable", "--no-requeue",
                                      "--job-name=tarn.alice.a.w-0.1", "--cpus-per-task=2",
                                      "--mem=512M", "-o", "/s/o", "-e", "/s/e", "/s/job.sh"}));
  r.gpus = 1;
  r.partition = "gpu";
  r.account = "ml";
  r.qos = "high";
  r.memory_mib = 0;  // --mem is always passed: Slurm's default may be a whole node
  r.extra_options = {"--time=60", "--comment=x y"};
  r.chdir = "/s";
  EXPECT_EQ(SbatchArgv(r),
            (std::vector<std::string>{"sbatch", "--parsable", "--no-requeue",
                                      "--job-name=tarn.alice.a.w-0.1", "--cpus-per-task=2",
                                      "--mem=1M", "--gres=gpu:1", "--partition=gpu", "--account=ml",
                                      "--qos=high", "--time=60", "--comment=x y", "--chdir=/s",
                                      "-o", "/s/o", "-e", "/s/e", "/s/job.sh"}));
  r.test_only = true;  // Slurm's verdict, nothing submitted
  EXPECT_EQ(SbatchArgv(r),
            (std::vector<std::string>{"sbatch", "--test-only", "--no-requeue",
                                      "--job-name=tarn.alice.a.w-0.1", "--cpus-per-task=2",
                                      "--mem=1M", "--gres=gpu:1", "--partition=gpu", "--account=ml",
                                      "--qos=high", "--time=60", "--comment=x y", "--wrap=true"}));
}

TEST(SlurmCommandsTest, SbatchAnswers) {
  EXPECT_EQ(*ParseSbatchJobId("1234\n"), 1234);
  EXPECT_EQ(*ParseSbatchJobId("1234;tarn\n"), 1234);
  EXPECT_FALSE(ParseSbatchJobId("Submitted batch job 12").ok());
  EXPECT_EQ(SlurmError("sbatch: error: Batch job submission failed: Requested node "
                       "configuration is not available\n"),
            "Batch job submission failed: Requested node configuration is not available");
  EXPECT_EQ(SlurmError("something else\n"), "something else");
}

TEST(SlurmCommandsTest, ParsesSinfoJson) {
  auto nodes = ParseSinfoJson(R"json({"errors": [], "nodes": [
      {"name": "node1", "address": "127.0.1.1", "cpus": 4, "real_memory": 4096,
       "gres": "gpu:2", "gres_used": "gpu:1(IDX:0)", "state": "mixed", "alloc_cpus": 1,
       "alloc_memory": 512, "partitions": ["main"]},
      {"name": "node2", "address": "127.0.1.2", "cpus": 8, "real_memory": 8192,
       "gres": "gpu:a100:4(S:0-1),mps:100", "gres_used": "gpu:a100:0", "state": "idle"}]})json");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].address, "127.0.1.1");
  EXPECT_EQ((*nodes)[0].gpus, 2);
  EXPECT_EQ((*nodes)[0].alloc_gpus, 1);
  EXPECT_EQ((*nodes)[0].partitions, std::vector<std::string>{"main"});
  EXPECT_EQ((*nodes)[1].gpus, 4);
  EXPECT_EQ((*nodes)[1].memory_mib, 8192);
}

TEST(SlurmCommandsTest, AddressFile) {
  auto a = ParseAddressFile("127.0.1.2 node2 34170001\n");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ip, "127.0.1.2");
  EXPECT_EQ(a->node, "node2");
  EXPECT_EQ(a->job_id, 34170001);
  EXPECT_FALSE(ParseAddressFile("127.0.1.2 node2").ok());
}

// The batch script is run by /bin/sh with stand-ins for sinfo and srun on PATH: it writes
// the address file and execs srun with the shim, the node's address and the job's GPUs.
TEST(SlurmCommandsTest, BatchScriptReportsTheAddressAndRunsTheShim) {
  char tmpl[] = "/tmp/slurm_commands_test_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string inst = dir + "/it's";  // a quote in the path must survive
  ASSERT_EQ(std::system(("mkdir -p \"" + inst + "\"").c_str()), 0);
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ASSERT_EQ(std::system(("chmod +x '" + path + "'").c_str()), 0);
  };
  write(dir + "/sinfo", "#!/bin/sh\n[ \"$SLURM_CONF\" = /etc/x.conf ] && echo 127.0.1.2\n");
  write(dir + "/srun", "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > \"" + dir + "/argv\"\n");
  BatchScript b;
  b.slurm_conf = "/etc/x.conf";
  b.instance_dir = inst;
  b.shim_binary = "/opt/tarn/bin/tarn-shim";
  b.cpus = 2;
  b.gpus = 1;
  write(dir + "/job.sh", RenderBatchScript(b));
  const std::string cmd = "cd / && env PATH=" + dir +
                          ":/usr/bin:/bin SLURMD_NODENAME=node2 SLURM_JOB_ID=77 "
                          "CUDA_VISIBLE_DEVICES=1 /bin/sh " +
                          dir + "/job.sh";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream address(inst + "/address");
  std::string text((std::istreambuf_iterator<char>(address)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "127.0.1.2 node2 77\n");
  std::ifstream argv_file(dir + "/argv");
  std::string argv((std::istreambuf_iterator<char>(argv_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(argv,
            "--ntasks=1\n--cpus-per-task=2\n--gres=gpu:1\n/opt/tarn/bin/tarn-shim\n--foreground\n" +
                inst +
                "\n--env\nTARN_IP=127.0.1.2\n--env\nCUDA_VISIBLE_DEVICES=1\n--env\n"
                "NVIDIA_VISIBLE_DEVICES=1\n");
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(SlurmCommandsTest, AGangIsOneHeterogeneousSbatch) {
  SbatchRequest r;
  r.job_name = "tarn.alice.fmnist.gang.7";
  r.partition = "gpu";
  r.extra_options = {"--time=60"};
  r.stdout_path = "/s/out";
  r.stderr_path = "/s/err";
  r.script_path = "/s/job.sh";
  r.chdir = "/s";
  EXPECT_EQ(GangSbatchArgv(r, {{2, 1, 1024, 0}, {2, 2, 2000, 1}}),
            (std::vector<std::string>{"sbatch",
                                      "--parsable",
                                      "--no-requeue",
                                      "--job-name=tarn.alice.fmnist.gang.7",
                                      "-o",
                                      "/s/out",
                                      "-e",
                                      "/s/err",
                                      "--chdir=/s",
                                      "--partition=gpu",
                                      "--time=60",
                                      "--ntasks=2",
                                      "--cpus-per-task=1",
                                      "--mem-per-cpu=1024M",
                                      ":",
                                      "--partition=gpu",
                                      "--time=60",
                                      "--ntasks=2",
                                      "--cpus-per-task=2",
                                      "--mem-per-cpu=1000M",
                                      "--gpus-per-task=1",
                                      "/s/job.sh"}));
  // Memory per CPU rounds up, so a task never gets less than it asked for.
  EXPECT_EQ(StepSrunOptions(1, {2, 3, 1000, 0}),
            (std::vector<std::string>{"--het-group=1", "--ntasks=1", "--exact", "--cpus-per-task=3",
                                      "--mem-per-cpu=334M"}));
}

// The gang's script takes a request by renaming it and runs the member's launch.sh, whose
// srun (a stand-in here) runs step.sh; the step reports its address with the container id
// and step id, and launch.sh records the step's end.
TEST(SlurmCommandsTest, GangScriptsStartAStepAndRecordItsEnd) {
  char tmpl[] = "/tmp/slurm_commands_test_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string gang = dir + "/.gang", inst = dir + "/ps-0";
  ASSERT_EQ(std::system(("mkdir -p " + gang + "/requests " + inst).c_str()), 0);
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ASSERT_EQ(std::system(("chmod +x '" + path + "'").c_str()), 0);
  };
  write(dir + "/sinfo", "#!/bin/sh\necho 127.0.1.1\n");
  // srun: runs the script it is given (its last argument), as a step would.
  write(dir + "/srun",
        "#!/bin/sh\nfor a in \"$@\"; do last=$a; done\n"
        "SLURM_STEP_ID=4 exec /bin/sh \"$last\"\n");
  write(dir + "/tarn-shim", "#!/bin/sh\nexit 3\n");
  BatchScript b;
  b.instance_dir = inst;
  b.shim_binary = dir + "/tarn-shim";
  b.step_container_id = "alice_f_ps-0_2";
  write(inst + "/step.sh", RenderBatchScript(b));
  write(inst + "/launch.sh", RenderLaunchScript(inst, "alice_f_ps-0_2", "tarn.alice.f.ps-0.2",
                                                StepSrunOptions(0, {2, 1, 64, 0})));
  write(gang + "/job.sh", RenderGangScript("", gang));
  write(gang + "/requests/ps-0", inst + "\n");
  const std::string cmd = "cd / && env PATH=" + dir +
                          ":/usr/bin:/bin SLURMD_NODENAME=node1 SLURM_JOB_ID=90 "
                          "timeout 3 /bin/sh " +
                          gang + "/job.sh >/dev/null";
  std::system(cmd.c_str());  // the gang's script runs until its job ends: here, the timeout
  std::ifstream address(inst + "/address");
  std::string text((std::istreambuf_iterator<char>(address)), std::istreambuf_iterator<char>());
  auto a = ParseAddressFile(text);
  ASSERT_TRUE(a.ok()) << text;
  EXPECT_EQ(a->ip, "127.0.1.1");
  EXPECT_EQ(a->job_id, 90);
  EXPECT_EQ(a->container_id, "alice_f_ps-0_2");
  EXPECT_EQ(a->step_id, 4);
  std::ifstream end_file(inst + "/step.end");
  std::string end_text((std::istreambuf_iterator<char>(end_file)),
                       std::istreambuf_iterator<char>());
  auto end = ParseStepEnd(end_text);
  ASSERT_TRUE(end.ok()) << end_text;
  EXPECT_EQ(end->container_id, "alice_f_ps-0_2");
  EXPECT_EQ(end->exit_status, 3);
  EXPECT_FALSE(std::filesystem::exists(gang + "/requests/ps-0")) << "the request was taken";

  // Stopped before it ran: the step exits 143 without reporting an address.
  std::filesystem::remove(inst + "/address");
  write(inst + "/stop", "alice_f_ps-0_2\n");
  EXPECT_EQ(
      std::system(("cd / && env PATH=" + dir + ":/usr/bin:/bin sh " + inst + "/launch.sh").c_str()),
      0);
  EXPECT_FALSE(std::filesystem::exists(inst + "/address"));
  std::ifstream end2(inst + "/step.end");
  std::string end2_text((std::istreambuf_iterator<char>(end2)), std::istreambuf_iterator<char>());
  EXPECT_EQ(end2_text, "alice_f_ps-0_2 143\n");
  EXPECT_FALSE(ParseStepEnd("x 999").ok());
  EXPECT_FALSE(ParseAddressFile("127.0.1.1 node1 90 cid notastep").ok());
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
TEST(SlurmCommandsTest, ReadsJobCompRecords) {
  const std::string text =
      "JobId=540003 UserId=root(0) GroupId=root(0) Name=wrap JobState=FAILED Partition=main "
      "StartTime=2026-11-30T15:22:46 EndTime=2026-11-30T15:22:46 NodeList=node1 NodeCnt=1 "
      "DerivedExitCode=0:0 ExitCode=0:9 \n"
      "JobId=540001 UserId=root(0) GroupId=root(0) Name=tarn.a.b.c-0.1 JobState=FAILED "
      "EndTime=2026-11-30T15:22:46 NodeList=node1 DerivedExitCode=0:125 ExitCode=1:0 \n"
      "JobId=54000 UserId=root(0) Name=x JobState=CANCELLED DerivedExitCode=0:0 ExitCode=0:0 \n"
      "JobId=540001 UserId=root(0) Name=tarn.a.b.c-0.1 JobState=TIMEOUT EndTime=junk "
      "DerivedExitCode=0:0 ExitCode=0:0 \n";
  std::optional<SlurmJob> killed = FindJobCompRecord(text, 540003);
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->state, "FAILED");
  EXPECT_EQ(killed->exit_code, 9);  // the wait status of a SIGKILL
  EXPECT_EQ(killed->nodes, "node1");
  EXPECT_GT(killed->end_time, 1700000000);
  JobView v = ViewJob(*killed);
  EXPECT_EQ(v.exit.signal, 9);
  // The last record of a job wins (a requeued job has several); a bad EndTime is none.
  std::optional<SlurmJob> last = FindJobCompRecord(text, 540001);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->state, "TIMEOUT");
  EXPECT_EQ(last->end_time, 0);
  EXPECT_EQ(ViewJob(*last).exit.exit_code, -1) << "a TIMEOUT never reads as a success";
  EXPECT_EQ(FindJobCompRecord(text, 54000)->state, "CANCELLED");  // not 540001's prefix
  EXPECT_FALSE(FindJobCompRecord(text, 5400));
  EXPECT_FALSE(FindJobCompRecord("", 1));
  // An OOM inside an srun step: derived 0:125, as squeue's 253.
  std::optional<SlurmJob> oom =
      FindJobCompRecord("JobId=7 JobState=FAILED DerivedExitCode=0:125 ExitCode=1:0\n", 7);
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->exit_code, 256);
  EXPECT_TRUE(ViewJob(*oom).exit.oom_killed);
}

TEST(SlurmCommandsTest, FindsTheJobCompFileInTheConfig) {
  EXPECT_EQ(JobCompFile("JobCompHost             = localhost\n"
                        "JobCompLoc              = /tmp/hc/log/jobcomp.txt\n"
                        "JobCompPort             = 0\n"
                        "JobCompType             = jobcomp/filetxt\n"),
            "/tmp/hc/log/jobcomp.txt");
  EXPECT_EQ(JobCompFile("JobCompLoc = /var/log/x\nJobCompType = jobcomp/elasticsearch\n"), "");
  EXPECT_EQ(JobCompFile("JobCompType = jobcomp/none\n"), "");
  EXPECT_EQ(JobCompFile(""), "");
}

}  // namespace tarn::backend
