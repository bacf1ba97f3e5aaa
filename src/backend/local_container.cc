#include "backend/local_container.h"

#include <algorithm>
#include <set>

#include "spec/config_render.h"
#include "spec/plan.h"
#include "spec/substitution.h"

namespace tarn::backend {

Status CheckArtifactRuns(const spec::Component& component, bool runs_images) {
  if (!component.artifact || component.artifact->type != spec::ArtifactType::kDocker ||
      runs_images) {
    return OkStatus();
  }
  return FailedPreconditionError(
      "component " + component.name + " asks for the image \"" + component.artifact->id +
      "\" (a DOCKER artifact), and this backend runs no images (Slurm's runs each instance as "
      "a process on its node): it refuses rather than run the command on the host without the "
      "image (docs/runtime.md); run it on the local backend, or give the component a TARBALL "
      "artifact or none");
}

std::string WorkDir(const LaunchContext& c, const std::string& assembly,
                    const std::string& instance) {
  return c.state_dir + "/containers/" + c.user + "/" + assembly + "/" + instance;
}

std::string ShimDir(const LaunchContext& c, const std::string& assembly,
                    const std::string& instance) {
  return c.state_dir + "/shims/" + c.user + "/" + assembly + "/" + instance;
}

std::string SharedDir(const LaunchContext& c, const std::string& assembly) {
  return c.state_dir + "/shared/" + c.user + "/" + assembly;
}

spec::ReadinessCheck SubstituteCheck(const spec::ReadinessCheck& check,
                                     const spec::Assembly& assembly,
                                     const spec::Component& component, int64_t index,
                                     const std::string& container_id, const LaunchContext& ctx) {
  spec::Variables vars =
      spec::InstanceVariables(spec::AssemblyVariables(assembly, ctx.user, ctx.domain), assembly,
                              component, index, ctx.user, ctx.domain);
  vars.Set("CONTAINER_ID", container_id);
  vars.Set("SERVICE_HDFS_DIR", SharedDir(ctx, assembly.name));
  spec::ReadinessCheck substituted = check;
  for (auto& [name, value] : substituted.properties) value = spec::Substitute(value, vars).text;
  return substituted;
}

std::string ContainerHostname(const std::string& fqdn, const std::string& instance) {
  return fqdn.size() <= 64 ? fqdn : instance;
}

StatusOr<runtime::ContainerSpec> BuildContainerSpec(const spec::Assembly& a,
                                                    const spec::Component& c, int64_t index,
                                                    const std::vector<int>& gpus,
                                                    const LaunchContext& ctx) {
  const std::string instance = spec::InstanceName(c.name, index);
  const std::string fqdn = spec::InstanceHostname(instance, a.name, ctx.user, ctx.domain);
  const std::string shared = SharedDir(ctx, a.name);
  spec::Variables vars = spec::InstanceVariables(spec::AssemblyVariables(a, ctx.user, ctx.domain),
                                                 a, c, index, ctx.user, ctx.domain);
  vars.Set("CONTAINER_ID", ctx.container_id);
  vars.Set("SERVICE_HDFS_DIR", shared);
  vars.SetAddressLookup([&](const std::string& peer) {
    if (peer == instance) return ctx.ip;
    return ctx.peer_address ? ctx.peer_address(peer) : std::string();
  });

  runtime::ContainerSpec s;
  s.id = ctx.user + "/" + a.name + "/" + instance;
  s.shim_dir = ShimDir(ctx, a.name, instance);
  s.work_dir = WorkDir(ctx, a.name, instance);
  s.hostname = ContainerHostname(fqdn, instance);
  s.run_uid = ctx.run_as.account.uid;
  s.run_gid = ctx.run_as.account.gid;
  s.cgroup = "tarn/" + ctx.user + "/" + a.name + "/" + instance;
  s.limits.memory_mib = c.resource.memory_mib.value_or(0);
  s.limits.vcores = c.resource.cpus.value_or(0);
  s.limits.pids_max = ctx.pids_max;
  s.limits.restrict_devices = ctx.restrict_devices;
  s.limits.gpu_minors = gpus;  // NVIDIA device minors follow the indices nvidia-smi reports
  s.gpus = gpus;
  // The component's tarn.stop.grace_secs, else the server's default (spec's, 30 s).
  s.stop_grace_ms = c.configuration.properties.count("tarn.stop.grace_secs")
                        ? c.stop_grace_secs * 1000
                        : ctx.stop_grace_ms;

  std::string command = spec::Substitute(c.launch_command, vars).text;
  const bool docker = c.artifact && c.artifact->type == spec::ArtifactType::kDocker;
  if (!command.empty()) s.argv = {"/bin/sh", "-c", command};
  if (docker) {
    s.image = c.artifact->id;
    s.bind_paths = {s.work_dir, shared};
  } else if (c.artifact && c.artifact->type == spec::ArtifactType::kTarball) {
    s.tarball = c.artifact->id;
  }

  // The environment: the plan's (the assembly's env after substitution, TARN_*, TF_CONFIG)
  // plus what exists only now that the instance is placed.
  std::vector<std::pair<std::string, std::string>> env =
      spec::InstanceEnv(a, c, index, ctx.user, ctx.domain, vars, ctx.ports);
  auto add = [&](const std::string& k, const std::string& v) { env.emplace_back(k, v); };
  add("TARN_IP", ctx.ip);
  add("TARN_SHARED_DIR", shared);
  add("TARN_CONTAINER_ID", ctx.container_id);
  if (!ctx.assembly_secret.empty()) add("TARN_ASSEMBLY_SECRET", ctx.assembly_secret);
  std::string gpu_list;
  for (size_t i = 0; i < gpus.size(); ++i) gpu_list += (i ? "," : "") + std::to_string(gpus[i]);
  // No GPUs placed: hide any the machine has (CUDA) and ask the NVIDIA runtime for none.
  add("CUDA_VISIBLE_DEVICES", gpu_list);
  add("NVIDIA_VISIBLE_DEVICES", gpus.empty() ? "void" : gpu_list);
  // PATH and HOME are defaults: an assembly that sets its own keeps it.
  auto has = [&](const std::string& k) {
    return std::any_of(env.begin(), env.end(), [&](const auto& e) { return e.first == k; });
  };
  if (!has("PATH") && !docker) {  // an image's own PATH stays
    add("PATH", ctx.bin_dir.empty() ? ctx.system_path : ctx.bin_dir + ":" + ctx.system_path);
  }
  if (!has("HOME")) add("HOME", s.work_dir);
  for (const auto& [k, v] : env) s.env.push_back(k + "=" + v);

  // ${<INSTANCE>_IP} of an instance that holds no address yet is never passed on as written
  // (a shell would read ${PS-0_IP} as "PS, else 0_IP").
  std::set<std::string> unplaced;
  auto check = [&](const std::string& text) {
    for (std::string& peer : spec::UnresolvedAddresses(text, vars)) unplaced.insert(peer);
  };
  check(command);
  for (const std::string& e : s.env) check(e);
  for (const spec::ConfigFile& f : c.configuration.files) {
    ASSIGN_OR_RETURN(std::string content, spec::RenderConfigFile(f, vars));
    check(content);
    if (!f.dest_file.empty() && f.dest_file[0] == '/') {
      // Inside an image: written under conf/ and mounted at its place.
      std::string rel = "conf/abs" + f.dest_file;
      s.files.push_back({rel, std::move(content)});
      s.bind_paths.push_back(s.work_dir + "/" + rel + ":" + f.dest_file);
    } else {
      s.files.push_back({"conf/" + f.dest_file, std::move(content)});
    }
  }
  if (!unplaced.empty()) {
    std::string names;
    for (const std::string& peer : unplaced) {
      names += (names.empty() ? "" : ", ") + ("${" + spec::AddressVariable(peer) + "}");
    }
    return FailedPreconditionError(
        names + ": " + (unplaced.size() == 1 ? "that instance has" : "those instances have") +
        " no address yet (not placed); an instance that needs a peer's address starts after "
        "the peer's component (its dependencies), or in one gang with it");
  }
  return s;
}

}  // namespace tarn::backend
