// The SQLite store in $EGG_HOME/egg.db (WAL mode): every evaluation and profile, keyed by a hash of
// everything that can change its result. Writes are committed one by one, so an interrupted run keeps
// everything already finished. Open() migrates the schema explicitly and throws ConfigError for a newer
// schema, IoError when the file cannot be opened. One Store per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace egg::store {

inline constexpr int kSchemaVersion = 4;

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

// One candidate's screening (harness::Evaluator::Screen).
struct ScreeningRow {
  std::string key;
  std::string task_hash;
  std::string candidate_hash;
  std::string status;
  std::string reason;
  std::string time_json;  // Stats or null
  std::optional<double> max_abs_err;
};

// An `egg optimize` run and what it produced (see docs/pipeline.md).
struct RunRow {
  std::string id;
  std::string task_path;
  std::string task_hash;
  std::string backend;
  std::string device;
  std::string options_json;
  std::string status;  // running | ok | failed
  std::string stopped_because;
  std::string final_candidate_id;
  std::string report_json;
};

struct CandidateRow {
  std::string id;
  std::string run_id;
  std::string stage;
  std::string origin;  // code | debug
  std::string parent_id;
  std::string source;
  std::string description;
  std::string move;
  std::string eval_key;
  std::string status;
  std::optional<double> median_ms;
  std::optional<std::string> design_json =
      std::nullopt;  // the design record it was generated from; none for LLM source
};

struct MessageRow {
  std::string run_id;
  std::string prompt_hash;
  std::string stage;
  std::string role;
  std::string request_json;
  std::string reply_json;
};

struct DecisionRow {
  std::string run_id;
  std::string stage;
  int round = 0;
  std::string candidate_id;
  std::string move;
  bool accepted = false;
  std::string reason;
  std::optional<double> incumbent_ms;
  std::optional<double> candidate_ms;
};

struct LlmCallRow {
  std::string run_id;
  std::string purpose;
  std::string provider;
  std::string model;
  std::string prompt_hash;
  int64_t prompt_chars = 0;
  int64_t reply_chars = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  double latency_ms = 0;
  std::string error;
  std::string error_message;
  int attempts = 0;
  std::string reply_text;
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
  std::optional<ScreeningRow> FindScreening(const std::string& key);
  void PutScreening(const ScreeningRow& row);
  int SchemaVersion();
  // Copies every row of another egg store (one a remote `egg bench --ray` task wrote) into this one,
  // replacing rows with the same key; autoincrement ids are assigned afresh. Throws ConfigError when its
  // schema differs.
  void MergeFrom(const std::string& path);

  // Runs of `egg optimize` (run_records.cpp). Writes replace rows with the same key, so a resumed run
  // that re-derives a record does not duplicate it.
  void PutRun(const RunRow& row);
  std::optional<RunRow> FindRun(const std::string& id);
  void PutCandidate(const CandidateRow& row);
  std::vector<CandidateRow> CandidatesForRun(const std::string& run_id);
  void PutMessage(const MessageRow& row);
  std::vector<MessageRow> MessagesForRun(const std::string& run_id);
  void PutDecision(const DecisionRow& row);
  std::vector<DecisionRow> DecisionsForRun(const std::string& run_id);
  void PutLlmCall(const LlmCallRow& row);
  std::vector<LlmCallRow> LlmCallsForRun(const std::string& run_id);
  // The reply of the latest successful LLM call of `run_id` with this prompt hash, for replay on resume.
  std::optional<std::string> FindReplay(const std::string& run_id, const std::string& prompt_hash);
  void PutStageOutcome(const std::string& run_id, const std::string& stage, int seq,
                       const std::string& outcome_json);

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  sqlite3* Db() { return db_; }
  void Execute(const std::string& sql);
  void Migrate();
  void MergeTable(const std::string& table);

  sqlite3* db_;
};

}  // namespace egg::store
