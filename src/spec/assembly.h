// The assembly model: a YARN Services API v1 service ("Yarnfile") as tarn understands it.
//
// Values here are *effective*: a component's artifact, resource and configuration already
// include the service-level defaults, and tarn's own properties (tarn.tf.role, tarn.ports,
// ...) are parsed into typed fields. Assemblies are produced by ParseAssembly()
// (parser.h), which guarantees every invariant documented below; plain value types, safe to
// copy and to share read-only between threads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tarn::spec {

enum class ArtifactType { kDocker, kTarball, kService };

struct Artifact {
  std::string id;
  ArtifactType type = ArtifactType::kDocker;  // YARN's default when "type" is absent
  std::string uri;

  friend bool operator==(const Artifact&, const Artifact&) = default;
};

struct Resource {
  std::optional<int64_t> cpus;
  std::optional<int64_t> memory_mib;
  std::optional<int64_t> gpus;  // additional["yarn.io/gpu"].value

  friend bool operator==(const Resource&, const Resource&) = default;
};

enum class ConfigFileType {
  kXml,
  kProperties,
  kJson,
  kYaml,
  kTemplate,
  kEnv,
  kHadoopXml,
  kStatic,
  kArchive
};

struct ConfigFile {
  ConfigFileType type = ConfigFileType::kTemplate;
  std::string dest_file;
  // The contents of src_file, inlined: either from a data: URI in the input or read by the
  // client from a local path. Empty optional when the file has no src_file.
  std::optional<std::string> src_content;
  std::map<std::string, std::string> properties;

  friend bool operator==(const ConfigFile&, const ConfigFile&) = default;
};

struct Configuration {
  std::map<std::string, std::string> properties;
  std::map<std::string, std::string> env;
  std::vector<ConfigFile> files;

  friend bool operator==(const Configuration&, const Configuration&) = default;
};

enum class RestartPolicy { kAlways, kOnFailure, kNever };

enum class ReadinessType { kDefault, kHttp, kPort };

struct ReadinessCheck {
  ReadinessType type = ReadinessType::kDefault;
  std::map<std::string, std::string> properties;

  friend bool operator==(const ReadinessCheck&, const ReadinessCheck&) = default;
};

// tarn.tf.role: the TensorFlow job a component's instances belong to.
enum class TfRole { kNone, kChief, kWorker, kPs, kEvaluator };

// tarn.stop.grace_secs: its default (Kubernetes') and its largest value.
inline constexpr int64_t kDefaultStopGraceSecs = 30;
inline constexpr int64_t kMaxStopGraceSecs = 86400;
// tarn.upgrade.progress_deadline_secs: Kubernetes' progressDeadlineSeconds, and its largest.
inline constexpr int64_t kDefaultUpgradeDeadlineSecs = 600;
inline constexpr int64_t kMaxUpgradeDeadlineSecs = 86400;
// tarn.upgrade.deregistration_delay_ms: the registry's TTL (5 s), and its largest (10 min).
inline constexpr int64_t kDefaultDeregistrationDelayMs = 5000;
inline constexpr int64_t kMaxDeregistrationDelayMs = 600000;

struct NamedPort {
  std::string name;  // lowercase, usable as an SRV service label and in TARN_PORT_<NAME>
  int port = 0;      // 1..65535

  friend bool operator==(const NamedPort&, const NamedPort&) = default;
};

// tarn.autoscale.*: the component's replica count follows its load (docs/autoscaling.md):
// Knative's windows and panic mode, HPA's tolerance and scale-down stabilisation.
struct Autoscale {
  int64_t min = 1;
  int64_t max = 1;
  double target_in_flight = 2;  // requests in flight per replica (Ray Serve's default)
  double tolerance = 0.1;       // HPA: no change within 10% of the target
  int64_t stable_window_secs = 60;
  int64_t panic_window_secs = 6;
  double panic_threshold = 2.0;         // panic at twice the replicas there are
  int64_t scale_down_delay_secs = 300;  // HPA's scale-down stabilisation window

  friend bool operator==(const Autoscale&, const Autoscale&) = default;
};

struct Component {
  std::string name;                       // a DNS label
  int64_t number_of_containers = 0;       // 0..kMaxContainersPerComponent
  std::optional<Artifact> artifact;       // none: run launch_command as a plain process
  std::string launch_command;             // required unless the artifact is DOCKER
  Resource resource;                      // cpus and memory_mib always set after parsing
  Configuration configuration;            // merged with the service-level configuration
  std::vector<std::string> dependencies;  // names of other components; acyclic
  RestartPolicy restart_policy = RestartPolicy::kAlways;
  std::optional<ReadinessCheck> readiness_check;
  bool run_privileged_container = false;
  std::vector<std::string> quicklinks;  // keys of Assembly::quicklinks

  // tarn's own keys from configuration.properties.
  TfRole tf_role = TfRole::kNone;
  std::optional<int> tf_port;    // tarn.tf.port, else the first of `ports`
  std::vector<NamedPort> ports;  // tarn.ports
  // tarn.ports.public: the names of its ports (tarn.ports, or "tf") every local account may
  // connect to; the others are its tenant's alone (network walls).
  std::vector<std::string> public_ports;
  // tarn.stop.grace_secs: every stop tarn makes (stop, flex-down, preemption) sends SIGTERM,
  // then SIGKILL this long after (Kubernetes' terminationGracePeriodSeconds).
  int64_t stop_grace_secs = kDefaultStopGraceSecs;
  // tarn.autoscale.*: none, a fixed count (number_of_containers, flex).
  std::optional<Autoscale> autoscale;
  // tarn.upgrade.*: how an upgrade rolls through its instances (docs/upgrades.md): at most
  // max_unavailable of them down at once (Kubernetes' maxUnavailable; no surge), and each
  // READY within deadline_secs of its stop (progressDeadlineSeconds) or the upgrade stops.
  // A READY instance leaves the ready set (DNS, `ready` in the API) deregistration_delay_ms
  // before its stop, so that load balancers and DNS caches stop sending to it first (what
  // an AWS target group's deregistration delay or a Kubernetes preStop sleep does).
  int64_t upgrade_max_unavailable = 1;
  int64_t upgrade_deadline_secs = kDefaultUpgradeDeadlineSecs;
  int64_t upgrade_deregistration_delay_ms = kDefaultDeregistrationDelayMs;

  friend bool operator==(const Component&, const Component&) = default;
};

// Desired state given on input: YARN accepts STOPPED to save a service without launching it.
enum class DesiredState { kStarted, kStopped };

struct Assembly {
  std::string name;  // a DNS label
  std::string version;
  std::string description;
  std::optional<int64_t> lifetime_seconds;  // none: unlimited
  std::string queue;                        // empty: the daemon's default queue
  // Service-level defaults, kept as written so the assembly can be written back out.
  std::optional<Artifact> artifact;
  Resource resource;
  Configuration configuration;
  std::map<std::string, std::string> quicklinks;
  DesiredState desired_state = DesiredState::kStarted;
  std::vector<Component> components;
  bool gang = true;  // tarn.gang: the components with a tf role are placed all or none
  // tarn.priority: higher goes first in its queue; none: the queue's default.
  std::optional<int> priority;

  friend bool operator==(const Assembly&, const Assembly&) = default;
};

inline constexpr int64_t kMaxContainersPerComponent = 10000;
inline constexpr int64_t kMaxCpus = 4096;
inline constexpr int64_t kMaxMemoryMib = int64_t{16} << 20;  // 16 TiB
inline constexpr int64_t kMaxGpus = 64;
inline constexpr size_t kMaxInlineFileBytes = 1u << 20;

// The component named `name`, or nullptr.
const Component* FindComponent(const Assembly& a, std::string_view name);

const char* ArtifactTypeName(ArtifactType t);
const char* ConfigFileTypeName(ConfigFileType t);
const char* RestartPolicyName(RestartPolicy p);
const char* ReadinessTypeName(ReadinessType t);
const char* TfRoleName(TfRole r);  // "chief", "worker", "ps", "evaluator", "" for none

}  // namespace tarn::spec
