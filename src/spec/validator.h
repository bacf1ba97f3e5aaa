// The rules that span fields of an assembly: names and their DNS lengths, dependencies
// (existence, cycles), TensorFlow roles and ports, quicklinks, config file placement, and
// warnings for ${...} variables tarn does not know. Run by ParseAssembly after the
// field-by-field parse; tolerant of components the parse could only partly fill.
#pragma once

#include "spec/assembly.h"
#include "spec/diagnostics.h"
#include "spec/parser.h"

namespace tarn::spec {

void ValidateAssembly(const Assembly& assembly, const ParseOptions& options, Diagnostics& diags);

}  // namespace tarn::spec
