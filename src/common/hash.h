// Content hashing for cache keys. Sha256Hex never fails; FileSha256Hex throws IoError when the file
// cannot be read.
#pragma once

#include <string>
#include <string_view>

namespace egg {

std::string Sha256Hex(std::string_view data);
std::string FileSha256Hex(const std::string& path);

}  // namespace egg
