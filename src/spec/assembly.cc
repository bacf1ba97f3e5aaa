#include "spec/assembly.h"

namespace tarn::spec {

const Component* FindComponent(const Assembly& a, std::string_view name) {
  for (const Component& c : a.components) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const char* ArtifactTypeName(ArtifactType t) {
  switch (t) {
    case ArtifactType::kDocker:
      return "DOCKER";
    case ArtifactType::kTarball:
      return "TARBALL";
    case ArtifactType::kService:
      return "SERVICE";
  }
  return "?";
}

const char* ConfigFileTypeName(ConfigFileType t) {
  switch (t) {
    case ConfigFileType::kXml:
      return "XML";
    case ConfigFileType::kProperties:
      return "PROPERTIES";
    case ConfigFileType::kJson:
      return "JSON";
    case ConfigFileType::kYaml:
      return "YAML";
    case ConfigFileType::kTemplate:
      return "TEMPLATE";
    case ConfigFileType::kEnv:
      return "ENV";
    case ConfigFileType::kHadoopXml:
      return "HADOOP_XML";
    case ConfigFileType::kStatic:
      return "STATIC";
    case ConfigFileType::kArchive:
      return "ARCHIVE";
  }
  return "?";
}

const char* RestartPolicyName(RestartPolicy p) {
  switch (p) {
    case RestartPolicy::kAlways:
      return "ALWAYS";
    case RestartPolicy::kOnFailure:
      return "ON_FAILURE";
    case RestartPolicy::kNever:
      return "NEVER";
  }
  return "?";
}

const char* ReadinessTypeName(ReadinessType t) {
  switch (t) {
    case ReadinessType::kDefault:
      return "DEFAULT";
    case ReadinessType::kHttp:
      return "HTTP";
    case ReadinessType::kPort:
      return "PORT";
  }
  return "?";
}

const char* TfRoleName(TfRole r) {
  switch (r) {
    case TfRole::kNone:
      return "";
    case TfRole::kChief:
      return "chief";
    case TfRole::kWorker:
      return "worker";
    case TfRole::kPs:
      return "ps";
    case TfRole::kEvaluator:
      return "evaluator";
  }
  return "";
}

}  // namespace tarn::spec
