#include "expert/kir/kernel.h"

#include <fmt/format.h>

namespace egg::expert::kir {

std::string Print(const Function& function) {
  std::string params;
  for (size_t i = 0; i < function.pointers; ++i) {
    params += fmt::format("ptr{}, ", i);
  }
  for (size_t i = 0; i < function.constexprs.size(); ++i) {
    params += fmt::format("{}{}: tl.constexpr", i == 0 ? "" : ", ", function.constexprs[i]);
  }
  std::string code = fmt::format("@triton.jit\ndef {}({}):\n", function.name, params);
  code += fmt::format("    # {}\n", function.comment);
  const bool rows = function.domain.kind != Domain::Kind::kFlat;
  code += fmt::format("    xoffset = tl.program_id(0){} * XBLOCK\n",
                      function.domain.int64 ? ".to(tl.int64)" : "");
  code += fmt::format("    xindex = xoffset + tl.arange(0, XBLOCK){}\n", rows ? "[:, None]" : "");
  code += fmt::format("    xmask = xindex < {}\n", function.domain.size);
  if (function.domain.kind == Domain::Kind::kRows) {
    code += "    rbase = tl.arange(0, RBLOCK)[None, :]\n";
  }
  for (const std::string& line : Print(function.body)) {
    code += line + "\n";
  }
  return code;
}

std::string Print(const Kernel& kernel) {
  std::string code;
  for (const Function& function : kernel.functions) {
    code += (code.empty() ? "" : "\n\n") + Print(function);
  }
  return code;
}

}  // namespace egg::expert::kir
