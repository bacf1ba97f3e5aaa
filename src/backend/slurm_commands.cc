#include "backend/slurm_commands.h"

#include <sys/wait.h>

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "common/number.h"

namespace tarn::backend {
namespace {

using json = nlohmann::json;

int64_t IntField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->get<int64_t>();
}

std::string StringField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// The GPU count of a gres string: "gpu:2", "gpu:a100:2(S:0-1)", "gpu:0,mps:100" -> 2, 2, 0.
int64_t GpusOf(const std::string& gres) {
  int64_t total = 0;
  std::stringstream items(gres);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.rfind("gpu:", 0) != 0) continue;
    item = item.substr(0, item.find('('));
    const std::string count = item.substr(item.rfind(':') + 1);
    if (!count.empty() && std::all_of(count.begin(), count.end(), ::isdigit)) {
      total += std::stoll(count);
    }
  }
  return total;
}

// The errors squeue/sinfo put in their JSON ("errors": [{"error": "...", ...}]).
Status JsonErrors(const json& j, const std::string& what) {
  auto errors = j.find("errors");
  if (errors == j.end() || !errors->is_array() || errors->empty()) return OkStatus();
  const json& e = (*errors)[0];
  std::string text = e.is_object() ? StringField(e, "error") : e.dump();
  if (text.empty()) text = e.dump();
  return UnavailableError(what + ": " + text);
}

bool IsEndState(const std::string& state) {
  static const char* const kEnded[] = {"COMPLETED",     "FAILED",       "CANCELLED", "TIMEOUT",
                                       "OUT_OF_MEMORY", "NODE_FAIL",    "PREEMPTED", "BOOT_FAIL",
                                       "DEADLINE",      "SPECIAL_EXIT", "REVOKED"};
  return std::find(std::begin(kEnded), std::end(kEnded), state) != std::end(kEnded);
}

}  // namespace

StatusOr<std::vector<SlurmJob>> ParseSqueueJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    RETURN_IF_ERROR(JsonErrors(j, "squeue"));
    std::vector<SlurmJob> jobs;
    for (const json& e : j.at("jobs")) {
      SlurmJob job;
      job.job_id = IntField(e, "job_id");
      job.name = StringField(e, "name");
      job.state = StringField(e, "job_state");
      job.reason = StringField(e, "state_reason");
      job.nodes = StringField(e, "nodes");
      job.exit_code = IntField(e, "exit_code");
      job.derived_exit_code = IntField(e, "derived_exit_code");
      job.end_time = IntField(e, "end_time");
      job.het_job_id = IntField(e, "het_job_id");
      job.het_job_offset = IntField(e, "het_job_offset");
      jobs.push_back(std::move(job));
    }
    return jobs;
  } catch (const json::exception& e) {
    return DataLossError(std::string("squeue --json: unexpected output: ") + e.what());
  }
}

StatusOr<std::vector<SlurmNode>> ParseSinfoJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    RETURN_IF_ERROR(JsonErrors(j, "sinfo"));
    std::vector<SlurmNode> nodes;
    for (const json& e : j.at("nodes")) {
      SlurmNode n;
      n.name = StringField(e, "name");
      n.address = StringField(e, "address");
      n.cpus = IntField(e, "cpus");
      n.memory_mib = IntField(e, "real_memory");
      n.gpus = GpusOf(StringField(e, "gres"));
      n.alloc_cpus = IntField(e, "alloc_cpus");
      n.alloc_memory_mib = IntField(e, "alloc_memory");
      n.alloc_gpus = GpusOf(StringField(e, "gres_used"));
      n.state = StringField(e, "state");
      if (auto p = e.find("partitions"); p != e.end() && p->is_array()) {
        for (const json& name : *p) {
          if (name.is_string()) n.partitions.push_back(name.get<std::string>());
        }
      }
      nodes.push_back(std::move(n));
    }
    return nodes;
  } catch (const json::exception& e) {
    return DataLossError(std::string("sinfo --json: unexpected output: ") + e.what());
  }
}

std::optional<SlurmJob> FindJobCompRecord(const std::string& text, int64_t job_id) {
  const std::string key = "JobId=" + std::to_string(job_id) + " ";
  size_t at = std::string::npos;
  for (size_t pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos + 1)) {
    if (pos == 0 || text[pos - 1] == '\n') at = pos;
  }
  if (at == std::string::npos) return std::nullopt;
  const size_t end = std::min(text.find('\n', at), text.size());
  std::stringstream line(text.substr(at, end - at));
  SlurmJob job;
  job.job_id = job_id;
  // "E:S" -> the wait status squeue reports: exit code E, or killed by signal S.
  auto status = [](const std::string& v) -> int64_t {
    const size_t colon = v.find(':');
    if (colon == std::string::npos) return 0;
    const int64_t code = ParseInt64(v.substr(0, colon)).value_or(0);
    const int64_t sig = ParseInt64(v.substr(colon + 1)).value_or(0);
    return sig != 0 ? (sig & 0x7f) : (code & 0xff) << 8;
  };
  std::string field;
  while (line >> field) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = field.substr(0, eq), v = field.substr(eq + 1);
    if (k == "Name") {
      job.name = v;
    } else if (k == "JobState") {
      job.state = v;
    } else if (k == "NodeList") {
      job.nodes = v;
    } else if (k == "ExitCode") {
      job.exit_code = status(v);
    } else if (k == "DerivedExitCode") {
      job.derived_exit_code = status(v);
    } else if (k == "EndTime") {
      std::tm tm{};
      std::istringstream in(v);
      in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
      if (!in.fail()) {
        tm.tm_isdst = -1;
        const std::time_t t = std::mktime(&tm);
        if (t > 0) job.end_time = t;
      }
    }
  }
  if (job.state.empty()) return std::nullopt;
  return job;
}

std::string JobCompFile(const std::string& show_config) {
  std::stringstream in(show_config);
  std::string line, type, loc;
  auto value = [](const std::string& l) {
    const size_t eq = l.find('=');
    std::string v = eq == std::string::npos ? "" : l.substr(eq + 1);
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(" \r") + 1);
    return v;
  };
  while (std::getline(in, line)) {
    if (line.rfind("JobCompType ", 0) == 0 || line.rfind("JobCompType=", 0) == 0)
      type = value(line);
    if (line.rfind("JobCompLoc ", 0) == 0 || line.rfind("JobCompLoc=", 0) == 0) loc = value(line);
  }
  return type == "jobcomp/filetxt" && !loc.empty() && loc[0] == '/' ? loc : "";
}

JobView ViewJob(const SlurmJob& job) {
  JobView v;
  const std::string reason =
      job.reason.empty() || job.reason == "None" ? "" : " (" + job.reason + ")";
  if (job.state == "PENDING" || job.state == "CONFIGURING" || job.state == "REQUEUED" ||
      job.state == "SUSPENDED" || job.state == "RESIZING") {
    v.phase = JobView::Phase::kPending;
    v.detail = "Slurm: " + job.state + reason;
    return v;
  }
  if (!IsEndState(job.state)) {  // RUNNING, COMPLETING, STAGE_OUT, SIGNALING...
    v.phase = JobView::Phase::kRunning;
    v.detail = "Slurm: " + job.state + reason;
    return v;
  }
  v.phase = JobView::Phase::kEnded;
  v.preempted = job.state == "PREEMPTED";
  runtime::ExitInfo& e = v.exit;
  const int status = static_cast<int>(job.exit_code);
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
  } else {
    e.exit_code = WEXITSTATUS(status);
  }
  // Slurm marks an OOM kill inside an srun step only in the derived exit code: "0:125" in
  // jobcomp, 253 in squeue (the same signal number with the core-dump bit).
  const int derived = static_cast<int>(job.derived_exit_code);
  const bool step_oom = derived != 0 && WIFSIGNALED(derived) && WTERMSIG(derived) == 125;
  e.oom_killed = job.state == "OUT_OF_MEMORY" || step_oom;
  // An end that is not a success must never read as one (NODE_FAIL, TIMEOUT... may carry
  // a zero status): the restart policy would take it for a clean exit.
  if (job.state != "COMPLETED" && e.signal == 0 && e.exit_code == 0) e.exit_code = -1;
  if (job.end_time > 0) e.finished_at_ms = job.end_time * 1000;
  std::string how;
  if (job.state == "OUT_OF_MEMORY") {
    how = "";
  } else if (e.oom_killed) {
    how = ", killed: out of memory (over its --mem)";
  } else if (job.state == "FAILED" || job.state == "COMPLETED") {
    how = ", " + runtime::DescribeExit(e);
  }
  // "OutOfMemory" only repeats OUT_OF_MEMORY.
  const std::string shown_reason = job.state == "OUT_OF_MEMORY" ? "" : reason;
  e.diagnostics = "Slurm: " + job.state + shown_reason + how;
  v.detail = e.diagnostics;
  return v;
}

std::string JobName(const std::string& user, const std::string& assembly,
                    const std::string& instance, const std::string& container_id) {
  std::string suffix = container_id;
  const std::string prefix = user + "_" + assembly + "_" + instance + "_";
  if (container_id.rfind(prefix, 0) == 0) suffix = container_id.substr(prefix.size());
  return "tarn." + user + "." + assembly + "." + instance + "." + suffix;
}

SlurmPriority MapPriority(int priority, int max_priority, const std::vector<PriorityQos>& table) {
  SlurmPriority p;
  p.nice = std::max<int64_t>(0, int64_t{max_priority} - priority);
  const PriorityQos* best = nullptr;
  for (const PriorityQos& e : table) {
    if (e.priority <= priority && (best == nullptr || e.priority > best->priority)) best = &e;
  }
  if (best != nullptr) p.qos = best->qos;
  return p;
}

std::vector<std::string> SbatchArgv(const SbatchRequest& r) {
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      "--no-requeue",
      "--job-name=" + r.job_name,
      "--cpus-per-task=" + std::to_string(std::max<int64_t>(1, r.cpus)),
      "--mem=" + std::to_string(std::max<int64_t>(1, r.memory_mib)) + "M"};
  if (r.gpus > 0) argv.push_back("--gres=gpu:" + std::to_string(r.gpus));
  if (!r.partition.empty()) argv.push_back("--partition=" + r.partition);
  if (!r.account.empty()) argv.push_back("--account=" + r.account);
  if (!r.qos.empty()) argv.push_back("--qos=" + r.qos);
  if (r.nice > 0) argv.push_back("--nice=" + std::to_string(r.nice));
  argv.insert(argv.end(), r.extra_options.begin(), r.extra_options.end());
  if (r.test_only) {
    argv[1] = "--test-only";
    argv.push_back("--wrap=true");
    return argv;
  }
  if (!r.chdir.empty()) argv.push_back("--chdir=" + r.chdir);
  argv.insert(argv.end(), {"-o", r.stdout_path, "-e", r.stderr_path, r.script_path});
  return argv;
}

namespace {

void AddCommonOptions(const SbatchRequest& r, std::vector<std::string>& argv) {
  if (!r.partition.empty()) argv.push_back("--partition=" + r.partition);
  if (!r.account.empty()) argv.push_back("--account=" + r.account);
  if (!r.qos.empty()) argv.push_back("--qos=" + r.qos);
  if (r.nice > 0) argv.push_back("--nice=" + std::to_string(r.nice));
  argv.insert(argv.end(), r.extra_options.begin(), r.extra_options.end());
}

void AddShare(const HetComponent& c, std::vector<std::string>& argv) {
  const int64_t cpus = std::max<int64_t>(1, c.cpus);
  argv.push_back("--cpus-per-task=" + std::to_string(cpus));
  if (c.memory_mib > 0) {
    argv.push_back("--mem-per-cpu=" + std::to_string((c.memory_mib + cpus - 1) / cpus) + "M");
  }
  if (c.gpus > 0) argv.push_back("--gpus-per-task=" + std::to_string(c.gpus));
}

}  // namespace

std::vector<std::string> GangSbatchArgv(const SbatchRequest& r,
                                        const std::vector<HetComponent>& components) {
  std::vector<std::string> argv = {
      "sbatch", "--parsable",  "--no-requeue", "--job-name=" + r.job_name,
      "-o",     r.stdout_path, "-e",           r.stderr_path};
  // Before the first component's options: a job-wide option.
  if (!r.chdir.empty()) argv.push_back("--chdir=" + r.chdir);
  for (size_t i = 0; i < components.size(); ++i) {
    if (i > 0) argv.push_back(":");
    AddCommonOptions(r, argv);
    argv.push_back("--ntasks=" + std::to_string(std::max<int64_t>(1, components[i].tasks)));
    AddShare(components[i], argv);
  }
  argv.push_back(r.script_path);
  return argv;
}

std::vector<std::string> StepSrunOptions(int group, const HetComponent& component) {
  std::vector<std::string> argv = {"--het-group=" + std::to_string(group), "--ntasks=1", "--exact"};
  AddShare(component, argv);
  return argv;
}

std::string RenderGangScript(const std::string& slurm_conf, const std::string& gang_dir) {
  std::string s = "#!/bin/sh\n";
  s += "# Written by tarn server (slurm backend): holds a gang's heterogeneous allocation and\n";
  s += "# starts each member as an srun step in it when tarn asks (a file in requests/).\n";
  if (!slurm_conf.empty()) s += "SLURM_CONF=" + ShellQuote(slurm_conf) + "\nexport SLURM_CONF\n";
  s += "gang=" + ShellQuote(gang_dir) + "\n";
  s += "echo \"tarn: gang allocation $SLURM_JOB_ID on $SLURM_JOB_NODELIST\"\n";
  s += "while :; do\n";
  s += "  for r in \"$gang\"/requests/*; do\n";
  s += "    case \"$r\" in *.taken|*.withdrawn|*.tmp) continue ;; esac\n";
  s += "    [ -f \"$r\" ] || continue\n";
  s += "    # Taken by rename: tarn withdraws a request the same way, so only one of us wins.\n";
  s += "    mv \"$r\" \"$r.taken\" 2>/dev/null || continue\n";
  s += "    dir=$(cat \"$r.taken\")\n";
  s += "    rm -f \"$r.taken\"\n";
  s += "    [ -f \"$dir/launch.sh\" ] && sh \"$dir/launch.sh\" </dev/null &\n";
  s += "  done\n";
  s += "  sleep 0.2\n";
  s += "done\n";
  return s;
}

std::string RenderLaunchScript(const std::string& instance_dir, const std::string& container_id,
                               const std::string& job_name,
                               const std::vector<std::string>& srun_options) {
  std::string s = "#!/bin/sh\n";
  s += "# Written by tarn server (slurm backend): one start of a gang member, as a step.\n";
  s += "dir=" + ShellQuote(instance_dir) + "\n";
  s += "srun";
  for (const std::string& o : srun_options) s += " " + ShellQuote(o);
  s += " --job-name=" + ShellQuote(job_name);
  s += " -o \"$dir/stdout.log\" -e \"$dir/stderr.log\" /bin/sh \"$dir/step.sh\"\n";
  s += "rc=$?\n";
  s += "printf '%s %s\\n' " + ShellQuote(container_id) + " \"$rc\" > \"$dir/step.end.tmp\"\n";
  s += "mv -f \"$dir/step.end.tmp\" \"$dir/step.end\"\n";
  return s;
}

StatusOr<StepEnd> ParseStepEnd(const std::string& text) {
  std::stringstream in(text);
  StepEnd e;
  std::string rc;
  std::optional<int64_t> n;
  if (!(in >> e.container_id >> rc) || !(n = ParseInt64(rc)) || *n < 0 || *n > 255) {
    return DataLossError("step.end: expected \"<container id> <exit status>\", got \"" +
                         text.substr(0, 200) + "\"");
  }
  e.exit_status = static_cast<int>(*n);
  return e;
}

StatusOr<int64_t> ParseSbatchJobId(const std::string& out) {
  std::string first = out.substr(0, out.find_first_of(";\n"));
  while (!first.empty() && std::isspace(static_cast<unsigned char>(first.back()))) first.pop_back();
  if (first.empty() || first.size() > 18 || !std::all_of(first.begin(), first.end(), ::isdigit)) {
    return DataLossError("sbatch --parsable printed \"" + out.substr(0, 200) + "\", not a job id");
  }
  return std::stoll(first);
}

std::string SlurmError(const std::string& err) {
  std::string last;
  std::stringstream lines(err);
  std::string line;
  while (std::getline(lines, line)) {
    auto at = line.find(": error: ");
    if (at != std::string::npos) last = line.substr(at + 9);
  }
  if (!last.empty()) return last;
  std::string all = err;
  while (!all.empty() && std::isspace(static_cast<unsigned char>(all.back()))) all.pop_back();
  return all;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string RenderBatchScript(const BatchScript& b) {
  std::string s = "#!/bin/sh\n";
  s += "# Written by tarn server (slurm backend): runs one instance under tarn-shim.\n";
  if (!b.slurm_conf.empty())
    s += "SLURM_CONF=" + ShellQuote(b.slurm_conf) + "\nexport SLURM_CONF\n";
  s += "dir=" + ShellQuote(b.instance_dir) + "\n";
  const bool step = !b.step_container_id.empty();
  if (step) {
    s += "cid=" + ShellQuote(b.step_container_id) + "\n";
    s += "# Stopped before it ran: tarn asked for the stop before this step started.\n";
    s += "if [ -f \"$dir/stop\" ] && [ \"$(cat \"$dir/stop\")\" = \"$cid\" ]; then exit 143; fi\n";
  }
  s += "# The node's address (no job variable carries it): the instance binds it, and tarn's\n";
  s += "# DNS name of the instance points at it once this file is written.\n";
  s += "addr=$(sinfo -h -N -n \"$SLURMD_NODENAME\" -o %o | head -n 1)\n";
  s += "if [ -z \"$addr\" ]; then\n";
  s += "  echo \"tarn: cannot find the address of node $SLURMD_NODENAME (sinfo)\" >&2\n";
  s += "  exit 1\n";
  s += "fi\n";
  if (step) {
    s += "printf '%s %s %s %s %s\\n' \"$addr\" \"$SLURMD_NODENAME\" \"$SLURM_JOB_ID\" \"$cid\" "
         "\"$SLURM_STEP_ID\" > \"$dir/address.tmp\"\n";
  } else {
    s += "printf '%s %s %s\\n' \"$addr\" \"$SLURMD_NODENAME\" \"$SLURM_JOB_ID\" > "
         "\"$dir/address.tmp\"\n";
  }
  s += "mv -f \"$dir/address.tmp\" \"$dir/address\"\n";
  s += "gpus=${CUDA_VISIBLE_DEVICES-}\n";
  s += "nvidia=${gpus:-void}\n";
  if (step) {
    s += "exec";  // already inside the step srun started
  } else {
    s += "exec srun --ntasks=1 --cpus-per-task=" + std::to_string(std::max<int64_t>(1, b.cpus));
    if (b.gpus > 0) s += " --gres=gpu:" + std::to_string(b.gpus);
  }
  s += " \\\n  " + ShellQuote(b.shim_binary) + " --foreground \"$dir\" --env \"TARN_IP=$addr\"";
  s += " \\\n  --env \"CUDA_VISIBLE_DEVICES=$gpus\" --env \"NVIDIA_VISIBLE_DEVICES=$nvidia\"\n";
  return s;
}

StatusOr<ReportedAddress> ParseAddressFile(const std::string& text) {
  std::stringstream in(text);
  ReportedAddress a;
  std::string job;
  if (!(in >> a.ip >> a.node >> job) || job.empty() ||
      !std::all_of(job.begin(), job.end(), ::isdigit) || job.size() > 18) {
    return DataLossError("address file: expected \"<ip> <node> <job id>\", got \"" +
                         text.substr(0, 200) + "\"");
  }
  a.job_id = std::stoll(job);
  std::string cid, step;
  if (in >> cid >> step) {
    std::optional<int64_t> n = ParseInt64(step);
    if (!n || *n < 0) {
      return DataLossError("address file: bad step id in \"" + text.substr(0, 200) + "\"");
    }
    a.container_id = cid;
    a.step_id = *n;
  }
  return a;
}

}  // namespace tarn::backend
