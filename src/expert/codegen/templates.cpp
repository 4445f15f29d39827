#include "expert/codegen/templates.h"

#include <kainjow/mustache.hpp>

#include "common/error.h"

namespace egg::expert::templates {

std::string Render(const std::string& name, const Values& values) {
  const auto& files = EmbeddedFiles();
  const auto found = files.find(name);
  if (found == files.end()) {
    throw ConfigError("missing embedded template " + name);
  }
  kainjow::mustache::mustache view{std::string(found->second)};
  if (!view.is_valid()) {
    throw ConfigError("template " + name + ": " + view.error_message());
  }
  view.set_custom_escape([](const std::string& text) { return text; });
  kainjow::mustache::data data;
  for (const auto& [key, text] : values.text) {
    data.set(key, text);
  }
  for (const auto& [key, flag] : values.flags) {
    data.set(key, flag ? kainjow::mustache::data::type::bool_true : kainjow::mustache::data::type::bool_false);
  }
  return view.render(data);
}

}  // namespace egg::expert::templates
