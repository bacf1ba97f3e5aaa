// Renders a component's config file (configuration.files[i]) to the bytes tarn writes into
// the instance's conf/ directory, with YARN's variables substituted, in the file's type:
// Hadoop configuration XML (XML, HADOOP_XML), Java properties, JSON, YAML, ENV lines, a
// TEMPLATE's text, or a STATIC file's bytes as they are. Pure; thread-safe.
#pragma once

#include <string>

#include "common/status.h"
#include "spec/assembly.h"
#include "spec/substitution.h"

namespace tarn::spec {

StatusOr<std::string> RenderConfigFile(const ConfigFile& file, const Variables& vars);

}  // namespace tarn::spec
