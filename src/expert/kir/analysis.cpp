#include "expert/kir/analysis.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace egg::expert::kir {
namespace {

std::set<int> Buffers(const Kernel& kernel, Statement::Kind kind) {
  std::set<int> values;
  for (const Function& function : kernel.functions) {
    for (const Statement& statement : function.body) {
      if (statement.kind == kind && !IsScratch(statement.buffer)) {
        values.insert(statement.buffer);
      }
    }
    // a function's hand-written accesses reach what each of its launches passes at those parameters
    const std::vector<size_t>& parameters =
        kind == Statement::Kind::kLoad ? function.text_loads : function.text_stores;
    for (const KernelLaunch& launch : kernel.launches) {
      if (launch.function != function.name) {
        continue;
      }
      for (size_t parameter : parameters) {
        const int pointer = launch.pointers.at(parameter);
        if (!IsScratch(pointer)) {
          values.insert(pointer);
        }
      }
    }
  }
  return values;
}

// Calls `visit(statement, loops)` for each statement of the function but blank lines, `loops` the variables
// of the loops around it, outermost first.
template <typename Visit>
void WalkLoops(const Function& function, Visit visit) {
  std::vector<std::pair<int, std::string>> open;  // depth and variable of the loops the walk is inside
  std::vector<std::string> variables;
  for (const Statement& statement : function.body) {
    if (statement.kind == Statement::Kind::kText && statement.text.empty()) {
      continue;  // a blank line closes nothing
    }
    while (!open.empty() && open.back().first >= statement.depth) {
      open.pop_back();  // a statement at the loop's depth or shallower is after its body
      variables.pop_back();
    }
    visit(statement, variables);
    if (statement.kind == Statement::Kind::kLoop) {
      open.emplace_back(statement.depth, statement.name);
      variables.push_back(statement.name);
    }
  }
}

// The statements `keep` picks, each with the loops it runs in.
template <typename Keep>
std::vector<UpdateSite> SitesOf(const Function& function, Keep keep) {
  std::vector<UpdateSite> sites;
  WalkLoops(function, [&](const Statement& statement, const std::vector<std::string>& loops) {
    if (keep(statement)) {
      sites.push_back(UpdateSite{statement, loops});
    }
  });
  return sites;
}

}  // namespace

std::set<int> Reads(const Kernel& kernel) { return Buffers(kernel, Statement::Kind::kLoad); }

std::set<int> Writes(const Kernel& kernel) { return Buffers(kernel, Statement::Kind::kStore); }

int64_t BytesMoved(const Kernel& kernel, const Graph& graph) {
  int64_t bytes = 0;
  for (const std::set<int>& values : {Reads(kernel), Writes(kernel)}) {
    for (int value : values) {
      const TensorMeta& meta = *ValueAt(graph, value).meta;
      bytes += meta.Numel() * DTypeBytes(meta.dtype);
    }
  }
  return bytes;
}

StagedTiles StagedTileLoads(const Kernel& kernel) {
  StagedTiles tiles;
  for (const Function& function : kernel.functions) {
    for (const Statement& statement : function.body) {
      if (statement.kind != Statement::Kind::kLoad) {
        continue;
      }
      const int side = static_cast<int>(statement.side);
      tiles.a += (side & static_cast<int>(TileSide::kA)) != 0 ? 1 : 0;
      tiles.b += (side & static_cast<int>(TileSide::kB)) != 0 ? 1 : 0;
    }
  }
  return tiles;
}

std::vector<LoopNest> Loops(const Function& function) {
  std::vector<LoopNest> loops;
  WalkLoops(function, [&](const Statement& statement, const std::vector<std::string>& enclosing) {
    if (statement.kind == Statement::Kind::kLoop) {
      loops.push_back(LoopNest{statement.name, statement.range, enclosing});
    }
  });
  return loops;
}

std::vector<UpdateSite> Updates(const Function& function) {
  return SitesOf(function,
                 [](const Statement& statement) { return statement.kind == Statement::Kind::kUpdate; });
}

std::vector<UpdateSite> Products(const Function& function) {
  return SitesOf(function, [](const Statement& statement) { return statement.product.has_value(); });
}

std::vector<UpdateSite> Reductions(const Function& function) {
  return SitesOf(function,
                 [](const Statement& statement) { return statement.kind == Statement::Kind::kReduce; });
}

std::vector<Statement> RegisterTiles(const Function& function) {
  std::vector<Statement> tiles;
  std::copy_if(function.body.begin(), function.body.end(), std::back_inserter(tiles),
               [](const Statement& statement) { return statement.kind == Statement::Kind::kTile; });
  return tiles;
}

}  // namespace egg::expert::kir
