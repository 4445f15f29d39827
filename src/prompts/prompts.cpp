#include "prompts/prompts.h"

#include "common/error.h"

namespace egg::prompts {

std::string_view File(const std::string& name) {
  const auto& files = EmbeddedFiles();
  const auto found = files.find(name);
  if (found == files.end()) {
    throw ConfigError("prompt file prompts/" + name + " is not in this build");
  }
  return found->second;
}

std::string Render(std::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(text.size());
  size_t position = 0;
  while (position < text.size()) {
    const size_t open = text.find("{{", position);
    if (open == std::string_view::npos) {
      out.append(text.substr(position));
      break;
    }
    const size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      throw ConfigError("unclosed {{ in a prompt template");
    }
    out.append(text.substr(position, open - position));
    const std::string key(text.substr(open + 2, close - open - 2));
    const auto value = values.find(key);
    if (value == values.end()) {
      throw ConfigError("prompt template placeholder {{" + key + "}} has no value");
    }
    out.append(value->second);
    position = close + 2;
  }
  return out;
}

}  // namespace egg::prompts
