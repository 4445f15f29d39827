#include "common/fs.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace egg {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError("cannot read " + path);
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void WriteFileAtomic(const std::string& path, const std::string& contents) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw IoError("cannot write " + temporary);
    }
    out << contents;
    if (!out.flush()) {
      throw IoError("cannot write " + temporary);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    throw IoError("cannot rename " + temporary + " to " + path + ": " + error.message());
  }
}

bool FileExists(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

std::string AbsolutePath(const std::string& path) {
  std::error_code error;
  auto absolute = std::filesystem::absolute(path, error);
  if (error) {
    throw IoError("cannot resolve " + path + ": " + error.message());
  }
  return absolute.lexically_normal().string();
}

void CreateDirectories(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    throw IoError("cannot create directory " + path + ": " + error.message());
  }
}

}  // namespace egg
