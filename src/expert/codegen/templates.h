// Kernel and candidate-file templates from templates/ (Mustache, embedded at build time). Values are inserted
// verbatim (no HTML escaping); a missing template throws ConfigError (a build without it is broken).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace egg::expert::templates {

// Every file under templates/, keyed by its path relative to templates/ ("triton/repack.py.mustache").
const std::map<std::string, std::string_view>& EmbeddedFiles();

struct Values {
  std::map<std::string, std::string> text;
  std::map<std::string, bool> flags;  // sections: {{#flag}}...{{/flag}}
};

std::string Render(const std::string& name, const Values& values);

}  // namespace egg::expert::templates
