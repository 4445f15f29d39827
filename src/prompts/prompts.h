// Prompt templates and knowledge files from prompts/, embedded at build time. Templates use {{name}}
// placeholders. Lookups of a missing file throw ConfigError (a build without it is broken).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace egg::prompts {

// Every file under prompts/, keyed by its path relative to prompts/ ("code/common.md").
const std::map<std::string, std::string_view>& EmbeddedFiles();
std::string_view File(const std::string& name);
// Replaces each {{key}} by its value; an unknown placeholder throws ConfigError naming it.
std::string Render(std::string_view text, const std::map<std::string, std::string>& values);

}  // namespace egg::prompts
