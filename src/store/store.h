// The SQLite store in $EGG_HOME/egg.db (WAL mode): every evaluation and profile, keyed by a hash of
// everything that can change its result. Writes are committed one by one, so an interrupted run keeps
// everything already finished. Open() migrates the schema explicitly and throws ConfigError for a newer
// schema, IoError when the file cannot be opened. One Store per thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace egg::store {

inline constexpr int kSchemaVersion = 1;

struct EvaluationRow {
  std::string key;
  std::string task_path;
  std::string task_hash;
  std::string candidate_path;
  std::string candidate_hash;
  std::string gpu;
  std::string torch_version;
  std::string triton_version;
  std::string harness_version;
  std::string options_json;
  std::string status;
  std::string result_json;
};

struct ProfileRow {
  std::string key;
  std::string task_hash;
  std::string candidate_hash;
  std::string gpu;
  std::string result_json;
};

class Store {
 public:
  static std::unique_ptr<Store> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  std::optional<std::string> FindEvaluation(const std::string& key);
  void PutEvaluation(const EvaluationRow& row);
  std::vector<EvaluationRow> EvaluationsForTask(const std::string& task_hash);
  std::optional<std::string> FindProfile(const std::string& key);
  void PutProfile(const ProfileRow& row);
  int SchemaVersion();

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  void Execute(const std::string& sql);
  void Migrate();

  sqlite3* db_;
};

}  // namespace egg::store
