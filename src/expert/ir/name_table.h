// The names of the compiler's typed enums (algorithms, precisions, reduction, pool and scan kinds, recurrent
// cells; kernel kinds are named by their families, families/family.h), used only at the text and JSON edges:
// the design record, reports, the agents' messages and emitted Triton. Inside the compiler decisions compare
// enum values, never names.
//
// Each enum has one table, a specialization of EnumNames listing every value once with its name:
//
//   template <> struct EnumNames<ScanKind> {
//     static constexpr std::array<std::pair<ScanKind, std::string_view>, 2> kTable{{{ScanKind::kSum, "sum"},
//     ...}};
//   };
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace egg::expert {

template <typename Enum>
struct EnumNames;

// A name that is no value of its enum: a design record or a move naming an algorithm or precision that does
// not exist. Never a silent default.
class UnknownName : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

template <typename Enum>
constexpr std::string_view NameOf(Enum value) {
  for (const auto& [entry, name] : EnumNames<Enum>::kTable) {
    if (entry == value) {
      return name;
    }
  }
  return "?";
}

template <typename Enum>
std::string NameText(Enum value) {
  return std::string(NameOf(value));
}

template <typename Enum>
std::optional<Enum> FromName(std::string_view name) {
  for (const auto& [entry, entry_name] : EnumNames<Enum>::kTable) {
    if (entry_name == name) {
      return entry;
    }
  }
  return std::nullopt;
}

// The value named `name`, or UnknownName ("unknown <what> 'name' (one of a, b, c)").
template <typename Enum>
Enum ParseName(std::string_view name, std::string_view what) {
  if (const std::optional<Enum> value = FromName<Enum>(name)) {
    return *value;
  }
  std::string known;
  for (const auto& [entry, entry_name] : EnumNames<Enum>::kTable) {
    if (!entry_name.empty()) {
      known += (known.empty() ? "" : ", ") + std::string(entry_name);
    }
  }
  throw UnknownName("unknown " + std::string(what) + " '" + std::string(name) + "' (one of " + known + ")");
}

}  // namespace egg::expert
