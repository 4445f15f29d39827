#include "store/store.h"

#include <sqlite3.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "store/statement.h"

namespace egg::store {
namespace {

constexpr int kBusyTimeoutMs = 10000;
constexpr int kOpenRetries = 50;
constexpr int kOpenRetryMs = 100;

struct Migration {
  int version;
  const char* sql;
};

// Each entry moves the schema from version-1 to version. Never edit a released entry; append a new one.
constexpr std::array<Migration, 4> kMigrations = {{
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
    {2, R"sql(
      CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        task_path TEXT NOT NULL,
        task_hash TEXT NOT NULL,
        backend TEXT NOT NULL,
        device TEXT NOT NULL,
        options_json TEXT NOT NULL,
        status TEXT NOT NULL,
        stopped_because TEXT NOT NULL DEFAULT '',
        final_candidate_id TEXT NOT NULL DEFAULT '',
        report_json TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
      CREATE TABLE candidates (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (id),
        stage TEXT NOT NULL,
        origin TEXT NOT NULL,
        parent_id TEXT NOT NULL,
        source TEXT NOT NULL,
        description TEXT NOT NULL,
        move TEXT NOT NULL,
        eval_key TEXT NOT NULL,
        status TEXT NOT NULL,
        median_ms REAL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
      CREATE INDEX candidates_by_run ON candidates (run_id);
      CREATE TABLE messages (
        run_id TEXT NOT NULL REFERENCES runs (id),
        prompt_hash TEXT NOT NULL,
        stage TEXT NOT NULL,
        role TEXT NOT NULL,
        request_json TEXT NOT NULL,
        reply_json TEXT NOT NULL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        PRIMARY KEY (run_id, prompt_hash));
      CREATE TABLE decisions (
        run_id TEXT NOT NULL REFERENCES runs (id),
        stage TEXT NOT NULL,
        round INTEGER NOT NULL,
        candidate_id TEXT NOT NULL,
        move TEXT NOT NULL,
        accepted INTEGER NOT NULL,
        reason TEXT NOT NULL,
        incumbent_ms REAL,
        candidate_ms REAL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        PRIMARY KEY (run_id, stage, round, candidate_id));
      CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_hash TEXT NOT NULL,
        prompt_chars INTEGER NOT NULL,
        reply_chars INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        latency_ms REAL NOT NULL,
        error TEXT NOT NULL,
        error_message TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        reply_text TEXT NOT NULL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
      CREATE INDEX llm_calls_by_prompt ON llm_calls (run_id, prompt_hash);
      CREATE TABLE stage_outcomes (
        run_id TEXT NOT NULL REFERENCES runs (id),
        stage TEXT NOT NULL,
        seq INTEGER NOT NULL,
        outcome_json TEXT NOT NULL,
        PRIMARY KEY (run_id, stage));
    )sql"},
    {3, R"sql(
      CREATE TABLE screenings (
        key TEXT PRIMARY KEY,
        task_hash TEXT NOT NULL,
        candidate_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        reason TEXT NOT NULL,
        time_json TEXT NOT NULL,
        max_abs_err REAL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
      CREATE INDEX screenings_by_task ON screenings (task_hash);
    )sql"},
    {4, R"sql(
      ALTER TABLE candidates ADD COLUMN design_json TEXT;
    )sql"},
}};

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
  // Switching to WAL needs a moment alone with the file: another process opening it at once is waited for.
  for (int attempt = 0;; ++attempt) {
    try {
      store->Execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
      break;
    } catch (const EggError&) {
      if (attempt >= kOpenRetries) {
        throw;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kOpenRetryMs));
    }
  }
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
      if (SchemaVersion() >= migration.version) {  // another process migrated while this one waited
        Execute("COMMIT");
        continue;
      }
      Execute(migration.sql);
      Execute("PRAGMA user_version = " + std::to_string(migration.version));
      Execute("COMMIT");
    } catch (...) {
      Execute("ROLLBACK");
      throw;
    }
  }
}

void Store::MergeFrom(const std::string& path) {
  {
    Statement attach(db_, "ATTACH DATABASE ?1 AS merged");
    attach.Bind(1, path);
    attach.Step();
  }
  try {
    Statement version(db_, "PRAGMA merged.user_version");
    version.Step();
    if (version.Int(0) != kSchemaVersion) {
      throw ConfigError("the store " + path + " has schema version " + std::to_string(version.Int(0)) +
                        ", this egg " + std::to_string(kSchemaVersion));
    }
    std::vector<std::string> tables;
    Statement names(db_,
                    "SELECT name FROM merged.sqlite_master WHERE type = 'table' AND name NOT LIKE "
                    "'sqlite_%' ORDER BY rowid");
    while (names.Step()) {
      tables.push_back(names.Text(0));
    }
    Execute("BEGIN IMMEDIATE");
    for (const std::string& table : tables) {
      MergeTable(table);
    }
    Execute("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    Execute("DETACH DATABASE merged");
    throw;
  }
  Execute("DETACH DATABASE merged");
}

// Copies the table's columns but an INTEGER PRIMARY KEY of its own (an autoincrement id, numbered afresh
// here).
void Store::MergeTable(const std::string& table) {
  std::vector<std::string> names;
  std::string row_id;
  int key_columns = 0;
  Statement info(db_, "SELECT name, type, pk FROM pragma_table_info(?1, 'merged')");
  info.Bind(1, table);
  while (info.Step()) {
    names.push_back(info.Text(0));
    key_columns += info.Int(2) > 0 ? 1 : 0;
    row_id = info.Int(2) > 0 && info.Text(1) == "INTEGER" ? info.Text(0) : row_id;
  }
  std::string columns;
  for (const std::string& name : names) {
    if (key_columns != 1 || name != row_id) {
      columns += (columns.empty() ? "\"" : ", \"") + name + "\"";
    }
  }
  Execute("INSERT OR REPLACE INTO main.\"" + table + "\" (" + columns + ") SELECT " + columns +
          " FROM merged.\"" + table + "\"");
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

std::optional<ScreeningRow> Store::FindScreening(const std::string& key) {
  Statement statement(db_, R"sql(
      SELECT key, task_hash, candidate_hash, status, reason, time_json, max_abs_err
      FROM screenings WHERE key = ?1)sql");
  statement.Bind(1, key);
  if (!statement.Step()) {
    return std::nullopt;
  }
  ScreeningRow row{statement.Text(0), statement.Text(1), statement.Text(2), statement.Text(3),
                   statement.Text(4), statement.Text(5), std::nullopt};
  if (sqlite3_column_type(statement.Raw(), 6) != SQLITE_NULL) {
    row.max_abs_err = statement.Double(6);
  }
  return row;
}

void Store::PutScreening(const ScreeningRow& row) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO screenings (key, task_hash, candidate_hash, status, reason, time_json, max_abs_err)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7))sql");
  statement.Bind(1, row.key).Bind(2, row.task_hash).Bind(3, row.candidate_hash).Bind(4, row.status);
  statement.Bind(5, row.reason).Bind(6, row.time_json);
  if (row.max_abs_err) {
    statement.Bind(7, *row.max_abs_err);
  }
  statement.Step();
}

}  // namespace egg::store
