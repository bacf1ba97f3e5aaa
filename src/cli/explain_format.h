// Renders a Plan for people (aligned text) and for programs (JSON). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "spec/assembly.h"
#include "spec/plan.h"

namespace tarn::cli {

std::string FormatPlanText(const spec::Assembly& assembly, const spec::Plan& plan,
                           const std::string& user);
nlohmann::json FormatPlanJson(const spec::Assembly& assembly, const spec::Plan& plan,
                              const std::string& user);

}  // namespace tarn::cli
