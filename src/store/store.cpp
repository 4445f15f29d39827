#include "store/store.h"

#include <sqlite3.h>

#include <array>
#include <filesystem>

#include "common/error.h"
#include "common/fs.h"

namespace egg::store {
namespace {

constexpr int kBusyTimeoutMs = 10000;

struct Migration {
  int version;
  const char* sql;
};

// Each entry moves the schema from version-1 to version. Never edit a released entry; append a new one.
constexpr std::array<Migration, 1> kMigrations = {{
    {1, R"sql(
      CREATE TABLE evaluations (
        key TEXT PRIMARY KEY,
        task_path TEXT NOT NULL,
        task_hash TEXT NOT NULL,
        candidate_path TEXT NOT NULL,
        candidate_hash TEXT NOT NULL,
        gpu TEXT NOT NULL,
        torch_version TEXT NOT NULL,
        triton_version TEXT NOT NULL,
        harness_version TEXT NOT NULL,
        options_json TEXT NOT NULL,
        status TEXT NOT NULL,
        result_json TEXT NOT NULL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
      CREATE INDEX evaluations_by_task ON evaluations (task_hash);
      CREATE TABLE profiles (
        key TEXT PRIMARY KEY,
        task_hash TEXT NOT NULL,
        candidate_hash TEXT NOT NULL,
        gpu TEXT NOT NULL,
        result_json TEXT NOT NULL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
    )sql"},
}};

// RAII prepared statement; every failure is an IoError naming the database error.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &statement_, nullptr) != SQLITE_OK) {
      throw IoError(std::string("store: ") + sqlite3_errmsg(db));
    }
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, const std::string& value) {
    sqlite3_bind_text(statement_, index, value.c_str(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // True while a row is available.
  bool Step() {
    const int code = sqlite3_step(statement_);
    if (code == SQLITE_ROW) {
      return true;
    }
    if (code != SQLITE_DONE) {
      throw IoError(std::string("store: ") + sqlite3_errmsg(db_));
    }
    return false;
  }
  std::string Text(int column) {
    const unsigned char* text = sqlite3_column_text(statement_, column);
    return text ? reinterpret_cast<const char*>(text) : "";
  }
  int Int(int column) { return sqlite3_column_int(statement_, column); }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
};

}  // namespace

std::unique_ptr<Store> Store::Open(const std::string& path) {
  if (path != ":memory:") {
    const auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      CreateDirectories(parent.string());
    }
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw IoError("cannot open the store " + path + ": " + message);
  }
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  store->Execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
  store->Migrate();
  return store;
}

Store::~Store() { sqlite3_close(db_); }

void Store::Execute(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    throw IoError("store: " + text);
  }
}

int Store::SchemaVersion() {
  Statement statement(db_, "PRAGMA user_version");
  statement.Step();
  return statement.Int(0);
}

void Store::Migrate() {
  const int current = SchemaVersion();
  if (current > kSchemaVersion) {
    throw ConfigError("the store's schema version " + std::to_string(current) +
                      " is newer than this egg supports (" + std::to_string(kSchemaVersion) + ")");
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= current) {
      continue;
    }
    Execute("BEGIN IMMEDIATE");
    try {
      Execute(migration.sql);
      Execute("PRAGMA user_version = " + std::to_string(migration.version));
      Execute("COMMIT");
    } catch (...) {
      Execute("ROLLBACK");
      throw;
    }
  }
}

std::optional<std::string> Store::FindEvaluation(const std::string& key) {
  Statement statement(db_, "SELECT result_json FROM evaluations WHERE key = ?1");
  statement.Bind(1, key);
  if (!statement.Step()) {
    return std::nullopt;
  }
  return statement.Text(0);
}

void Store::PutEvaluation(const EvaluationRow& row) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO evaluations (key, task_path, task_hash, candidate_path, candidate_hash, gpu,
        torch_version, triton_version, harness_version, options_json, status, result_json)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12))sql");
  statement.Bind(1, row.key).Bind(2, row.task_path).Bind(3, row.task_hash).Bind(4, row.candidate_path);
  statement.Bind(5, row.candidate_hash)
      .Bind(6, row.gpu)
      .Bind(7, row.torch_version)
      .Bind(8, row.triton_version);
  statement.Bind(9, row.harness_version)
      .Bind(10, row.options_json)
      .Bind(11, row.status)
      .Bind(12, row.result_json);
  statement.Step();
}

std::vector<EvaluationRow> Store::EvaluationsForTask(const std::string& task_hash) {
  Statement statement(db_, R"sql(
      SELECT key, task_path, task_hash, candidate_path, candidate_hash, gpu, torch_version, triton_version,
             harness_version, options_json, status, result_json
      FROM evaluations WHERE task_hash = ?1 ORDER BY created_at)sql");
  statement.Bind(1, task_hash);
  std::vector<EvaluationRow> rows;
  while (statement.Step()) {
    rows.push_back({statement.Text(0), statement.Text(1), statement.Text(2), statement.Text(3),
                    statement.Text(4), statement.Text(5), statement.Text(6), statement.Text(7),
                    statement.Text(8), statement.Text(9), statement.Text(10), statement.Text(11)});
  }
  return rows;
}

std::optional<std::string> Store::FindProfile(const std::string& key) {
  Statement statement(db_, "SELECT result_json FROM profiles WHERE key = ?1");
  statement.Bind(1, key);
  if (!statement.Step()) {
    return std::nullopt;
  }
  return statement.Text(0);
}

void Store::PutProfile(const ProfileRow& row) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO profiles (key, task_hash, candidate_hash, gpu, result_json)
      VALUES (?1, ?2, ?3, ?4, ?5))sql");
  statement.Bind(1, row.key).Bind(2, row.task_hash).Bind(3, row.candidate_hash).Bind(4, row.gpu);
  statement.Bind(5, row.result_json);
  statement.Step();
}

}  // namespace egg::store
