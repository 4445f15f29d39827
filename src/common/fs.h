// Small file-system helpers. Each throws IoError with the path in the message on failure.
#pragma once

#include <string>

namespace egg {

std::string ReadFile(const std::string& path);
// Writes to a temporary file beside `path` and renames it over, so readers never see half a file.
void WriteFileAtomic(const std::string& path, const std::string& contents);
bool FileExists(const std::string& path);
std::string AbsolutePath(const std::string& path);
void CreateDirectories(const std::string& path);

}  // namespace egg
