// nlohmann::json with std::optional support: nullopt <-> null. Include this instead of nlohmann/json.hpp.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace nlohmann {
template <typename T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& value) {
    if (value) {
      j = *value;
    } else {
      j = nullptr;
    }
  }
  static void from_json(const json& j, std::optional<T>& value) {
    if (j.is_null()) {
      value = std::nullopt;
    } else {
      value = j.get<T>();
    }
  }
};
}  // namespace nlohmann

namespace egg {
using Json = nlohmann::json;
}  // namespace egg
