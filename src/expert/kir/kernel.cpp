#include "expert/kir/kernel.h"

#include <fmt/format.h>

#include <algorithm>

namespace egg::expert::kir {

namespace {

std::string Wide(bool int64) { return int64 ? ".to(tl.int64)" : ""; }

std::string FlatLanes(const Domain& domain) {
  const bool rows = domain.kind != Domain::Kind::kFlat;
  std::string code = fmt::format("    xoffset = tl.program_id(0){} * XBLOCK\n", Wide(domain.int64));
  code += fmt::format("    xindex = xoffset + tl.arange(0, XBLOCK){}\n", rows ? "[:, None]" : "");
  code += fmt::format("    xmask = xindex < {}\n", domain.size);
  if (domain.kind == Domain::Kind::kRows) {
    code += "    rbase = tl.arange(0, RBLOCK)[None, :]\n";
  }
  return code;
}

std::string TileLanes(const Domain& domain) {
  const TileOrder& order = domain.tiles;
  const std::string grid_m =
      order.runtime_rows ? fmt::format("tl.cdiv({}, BLOCK_M)", domain.size) : std::to_string(order.grid_m);
  std::string code = order.batch_inner > 0
                         ? fmt::format(
                               "    # the batch (output phases) fastest: a tile's phases run side by side\n"
                               "    bindex = tl.program_id(0){1} % {0}\n"
                               "    tile = tl.program_id(0) // {0}\n",
                               order.batch_inner, Wide(domain.int64))
                         : "    tile = tl.program_id(0)\n";
  code = fmt::format(
      "    # grouped tile order: {0} tile rows advance together along N, so their A rows and B columns stay "
      "in "
      "L2\n"
      "{3}"
      "    group = tile // {1}\n"
      "    group_rows = tl.minimum({2} - group * {0}, {0})\n"
      "    tile_m = group * {0} + (tile % {1}) % group_rows\n"
      "    tile_n = (tile % {1}) // group_rows\n",
      order.group_m, order.group_size, grid_m, code);
  if (order.batched && order.batch_inner == 0) {
    code += fmt::format("    bindex = tl.program_id(1){}\n", Wide(domain.int64));
  }
  code +=
      fmt::format("    mindex = tile_m{} * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]\n", Wide(domain.int64));
  code += "    nindex = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]\n";
  code += fmt::format("    mmask = mindex < {}\n    nmask = nindex < {}\n    omask = mmask & nmask\n",
                      domain.size, domain.columns);
  return code;
}

std::string PanelLanes(const Domain& domain) {
  return fmt::format(
      "    pindex = tl.program_id(0){0} * BLOCK_P + tl.arange(0, BLOCK_P)[:, None]\n"
      "    cindex = tl.program_id(1){0} * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]\n"
      "    pmask = pindex < {1}\n"
      "    cmask = cindex < {2}\n"
      "    mask = pmask & cmask\n",
      Wide(domain.int64), domain.size, domain.columns);
}

// The batch along axis 1 before the query rows, as the flash kernels always printed them.
std::string QueryLanes(const Domain& domain) {
  const HeadDims& heads = domain.heads;
  return fmt::format(
      "    bindex = tl.program_id(1){0}\n"
      "    mindex = tl.program_id(0){0} * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]\n"
      "    mmask = mindex < {1}\n"
      "    dqindex = tl.arange(0, {2})[None, :]\n"
      "    dqmask = dqindex < {3}\n"
      "    dkindex = tl.arange(0, {2})[:, None]\n"
      "    dkmask = dkindex < {3}\n"
      "    dvindex = tl.arange(0, {4})[None, :]\n"
      "    dvmask = dvindex < {5}\n"
      "    omask = mmask & dvmask\n",
      Wide(domain.int64), domain.size, heads.block_d, heads.d, heads.block_dv, heads.dv);
}

std::string Lanes(const Domain& domain) {
  switch (domain.kind) {
    case Domain::Kind::kFlat:
    case Domain::Kind::kRows:
    case Domain::Kind::kRowBlock:
      return FlatLanes(domain);
    case Domain::Kind::kTiles:
      return TileLanes(domain);
    case Domain::Kind::kPanels:
      return PanelLanes(domain);
    case Domain::Kind::kQueryBlocks:
      return QueryLanes(domain);
    case Domain::Kind::kOwnLanes:
      return "";
  }
  return "";
}

std::string Parameters(const Function& function) {
  std::string params;
  if (!function.signature.empty()) {
    for (const std::string& line : function.signature) {
      params += (params.empty() ? "" : "\n") + line;
    }
    return params;
  }
  for (size_t i = 0; i < function.pointers; ++i) {
    params += fmt::format("ptr{}, ", i);
  }
  for (size_t i = 0; i < function.constexprs.size(); ++i) {
    params += fmt::format("{}{}: tl.constexpr", i == 0 ? "" : ", ", function.constexprs[i]);
  }
  return params;
}

}  // namespace

std::string Print(const Function& function) {
  const std::string params = Parameters(function);
  std::string code = fmt::format("@triton.jit\ndef {}({}):\n", function.name, params);
  size_t start = 0;
  while (start <= function.comment.size()) {
    const size_t end = std::min(function.comment.find('\n', start), function.comment.size());
    code += fmt::format("    # {}\n", function.comment.substr(start, end - start));
    start = end + 1;
  }
  code += Lanes(function.domain);
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
