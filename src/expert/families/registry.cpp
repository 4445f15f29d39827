#include <fmt/format.h>

#include <cassert>
#include <stdexcept>

#include "expert/codegen/kernel_codegen.h"
#include "expert/design/legality.h"
#include "expert/families/common.h"
#include "expert/families/family.h"

namespace egg::expert {

// The families of families.def, each given its place as its kind.
class FamilyRegistry {
 public:
  FamilyRegistry() {
#define EGG_FAMILY(maker) Register(maker());
#include "expert/families/families.def"
#undef EGG_FAMILY
  }

  static const FamilyRegistry& Get() {
    static const FamilyRegistry registry;
    return registry;
  }

  const std::vector<const KernelFamily*>& All() const { return view_; }

 private:
  void Register(std::unique_ptr<KernelFamily> family) {
    family->kind_ = KernelKind{static_cast<int>(owned_.size())};
    view_.push_back(family.get());
    owned_.push_back(std::move(family));
  }

  std::vector<std::unique_ptr<KernelFamily>> owned_;
  std::vector<const KernelFamily*> view_;
};

std::optional<FamilyClaim> KernelFamily::Claim(const Graph& /*graph*/, const Node& /*node*/) const {
  return std::nullopt;
}

KernelDesign KernelFamily::FallbackDesign(const KernelPlan& kernel, int seed, Precision candidate) const {
  return DefaultDesign(kernel, seed, candidate);
}

bool KernelFamily::FitsResources(const KernelPlan& /*kernel*/, const KernelDesign& design) const {
  return TileFitsThreads(design.xblock, design);
}

KernelSource KernelFamily::Lower(const Graph& graph, const KernelPlan& kernel,
                                 const std::map<int, TensorMeta>& memory,
                                 const std::map<int, TensorMeta>& layouts) const {
  return SourceOf(LowerProgram(graph, kernel, memory, layouts));
}

std::string KernelFamily::Unwritable(const KernelPlan& /*kernel*/, const KernelDesign& /*design*/) const {
  return "";
}

const std::vector<const KernelFamily*>& Families() { return FamilyRegistry::Get().All(); }

const KernelFamily& FamilyOf(KernelKind kind) {
  const auto& all = Families();
  if (kind.id < 0 || static_cast<size_t>(kind.id) >= all.size()) {
    throw std::logic_error(fmt::format("no kernel family is registered as kind {}", kind.id));
  }
  return *all[static_cast<size_t>(kind.id)];
}

const KernelFamily& FamilyNamed(std::string_view name) {
  std::string names;
  for (const KernelFamily* family : Families()) {
    if (family->Name() == name) {
      return *family;
    }
    names += (names.empty() ? "" : ", ") + std::string(family->Name());
  }
  throw UnknownName(fmt::format("unknown kernel family '{}' (one of {})", name, names));
}

bool FamilyEnabled(const KernelFamily& family, const PlanOptions& options) {
  if (!family.Experimental()) {
    return true;
  }
  for (const std::string& name : options.families) {
    if (FamilyNamed(name).Kind() == family.Kind()) {
      return true;
    }
  }
  return false;
}

std::string KernelKindName(KernelKind kind) { return std::string(FamilyOf(kind).Name()); }

}  // namespace egg::expert
