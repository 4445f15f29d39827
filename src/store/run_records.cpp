// The run-record half of the store: runs, candidates, agent messages, decisions and LLM calls.
#include "store/statement.h"
#include "store/store.h"

namespace egg::store {
namespace {

void BindOptional(Statement& statement, int index, const std::optional<double>& value) {
  if (value) {
    statement.Bind(index, *value);
  }
}

std::optional<double> OptionalDouble(sqlite3_stmt* raw, int column) {
  if (sqlite3_column_type(raw, column) == SQLITE_NULL) {
    return std::nullopt;
  }
  return sqlite3_column_double(raw, column);
}

std::optional<std::string> OptionalText(sqlite3_stmt* raw, int column) {
  if (sqlite3_column_type(raw, column) == SQLITE_NULL) {
    return std::nullopt;
  }
  return std::string(reinterpret_cast<const char*>(sqlite3_column_text(raw, column)));
}

}  // namespace

void Store::PutRun(const RunRow& row) {
  Statement statement(db_, R"sql(
      INSERT INTO runs (id, task_path, task_hash, backend, device, options_json, status, stopped_because,
                        final_candidate_id, report_json)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
      ON CONFLICT (id) DO UPDATE SET status = excluded.status, stopped_because = excluded.stopped_because,
        final_candidate_id = excluded.final_candidate_id, report_json = excluded.report_json,
        updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))sql");
  statement.Bind(1, row.id).Bind(2, row.task_path).Bind(3, row.task_hash).Bind(4, row.backend);
  statement.Bind(5, row.device).Bind(6, row.options_json).Bind(7, row.status).Bind(8, row.stopped_because);
  statement.Bind(9, row.final_candidate_id).Bind(10, row.report_json);
  statement.Step();
}

std::optional<RunRow> Store::FindRun(const std::string& id) {
  Statement statement(db_, R"sql(
      SELECT id, task_path, task_hash, backend, device, options_json, status, stopped_because,
             final_candidate_id, report_json FROM runs WHERE id = ?1 OR id LIKE ?1 || '%' LIMIT 2)sql");
  statement.Bind(1, id);
  if (!statement.Step()) {
    return std::nullopt;
  }
  RunRow row{statement.Text(0), statement.Text(1), statement.Text(2), statement.Text(3), statement.Text(4),
             statement.Text(5), statement.Text(6), statement.Text(7), statement.Text(8), statement.Text(9)};
  if (row.id != id && statement.Step()) {
    throw UsageError("run id prefix '" + id + "' is ambiguous");
  }
  return row;
}

void Store::PutCandidate(const CandidateRow& row) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO candidates (id, run_id, stage, origin, parent_id, source, description, move,
                                         eval_key, status, median_ms, design_json)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12))sql");
  statement.Bind(1, row.id).Bind(2, row.run_id).Bind(3, row.stage).Bind(4, row.origin).Bind(5, row.parent_id);
  statement.Bind(6, row.source).Bind(7, row.description).Bind(8, row.move).Bind(9, row.eval_key);
  statement.Bind(10, row.status);
  BindOptional(statement, 11, row.median_ms);
  if (row.design_json) {
    statement.Bind(12, *row.design_json);
  }
  statement.Step();
}

std::vector<CandidateRow> Store::CandidatesForRun(const std::string& run_id) {
  Statement statement(db_, R"sql(
      SELECT id, run_id, stage, origin, parent_id, source, description, move, eval_key, status, median_ms,
             design_json
      FROM candidates WHERE run_id = ?1 ORDER BY created_at, rowid)sql");
  statement.Bind(1, run_id);
  std::vector<CandidateRow> rows;
  while (statement.Step()) {
    rows.push_back({statement.Text(0), statement.Text(1), statement.Text(2), statement.Text(3),
                    statement.Text(4), statement.Text(5), statement.Text(6), statement.Text(7),
                    statement.Text(8), statement.Text(9), OptionalDouble(statement.Raw(), 10),
                    OptionalText(statement.Raw(), 11)});
  }
  return rows;
}

void Store::PutMessage(const MessageRow& row) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO messages (run_id, prompt_hash, stage, role, request_json, reply_json)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6))sql");
  statement.Bind(1, row.run_id).Bind(2, row.prompt_hash).Bind(3, row.stage).Bind(4, row.role);
  statement.Bind(5, row.request_json).Bind(6, row.reply_json);
  statement.Step();
}

std::vector<MessageRow> Store::MessagesForRun(const std::string& run_id) {
  Statement statement(db_, R"sql(
      SELECT run_id, prompt_hash, stage, role, request_json, reply_json FROM messages
      WHERE run_id = ?1 ORDER BY created_at, rowid)sql");
  statement.Bind(1, run_id);
  std::vector<MessageRow> rows;
  while (statement.Step()) {
    rows.push_back({statement.Text(0), statement.Text(1), statement.Text(2), statement.Text(3),
                    statement.Text(4), statement.Text(5)});
  }
  return rows;
}

void Store::PutDecision(const DecisionRow& row) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO decisions (run_id, stage, round, candidate_id, move, accepted, reason,
                                        incumbent_ms, candidate_ms)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9))sql");
  statement.Bind(1, row.run_id).Bind(2, row.stage).Bind(3, static_cast<int64_t>(row.round));
  statement.Bind(4, row.candidate_id).Bind(5, row.move).Bind(6, static_cast<int64_t>(row.accepted ? 1 : 0));
  statement.Bind(7, row.reason);
  BindOptional(statement, 8, row.incumbent_ms);
  BindOptional(statement, 9, row.candidate_ms);
  statement.Step();
}

std::vector<DecisionRow> Store::DecisionsForRun(const std::string& run_id) {
  Statement statement(db_, R"sql(
      SELECT run_id, stage, round, candidate_id, move, accepted, reason, incumbent_ms, candidate_ms
      FROM decisions WHERE run_id = ?1 ORDER BY created_at, rowid)sql");
  statement.Bind(1, run_id);
  std::vector<DecisionRow> rows;
  while (statement.Step()) {
    rows.push_back({statement.Text(0), statement.Text(1), statement.Int(2), statement.Text(3),
                    statement.Text(4), statement.Int(5) != 0, statement.Text(6),
                    OptionalDouble(statement.Raw(), 7), OptionalDouble(statement.Raw(), 8)});
  }
  return rows;
}

void Store::PutLlmCall(const LlmCallRow& row) {
  Statement statement(db_, R"sql(
      INSERT INTO llm_calls (run_id, purpose, provider, model, prompt_hash, prompt_chars, reply_chars,
        input_tokens, output_tokens, cost_usd, latency_ms, error, error_message, attempts, reply_text)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15))sql");
  statement.Bind(1, row.run_id).Bind(2, row.purpose).Bind(3, row.provider).Bind(4, row.model);
  statement.Bind(5, row.prompt_hash).Bind(6, row.prompt_chars).Bind(7, row.reply_chars);
  statement.Bind(8, row.input_tokens)
      .Bind(9, row.output_tokens)
      .Bind(10, row.cost_usd)
      .Bind(11, row.latency_ms);
  statement.Bind(12, row.error).Bind(13, row.error_message).Bind(14, static_cast<int64_t>(row.attempts));
  statement.Bind(15, row.reply_text);
  statement.Step();
}

std::vector<LlmCallRow> Store::LlmCallsForRun(const std::string& run_id) {
  Statement statement(db_, R"sql(
      SELECT run_id, purpose, provider, model, prompt_hash, prompt_chars, reply_chars, input_tokens,
             output_tokens, cost_usd, latency_ms, error, error_message, attempts, reply_text
      FROM llm_calls WHERE run_id = ?1 ORDER BY id)sql");
  statement.Bind(1, run_id);
  std::vector<LlmCallRow> rows;
  while (statement.Step()) {
    rows.push_back({statement.Text(0), statement.Text(1), statement.Text(2), statement.Text(3),
                    statement.Text(4), statement.Int64(5), statement.Int64(6), statement.Int64(7),
                    statement.Int64(8), statement.Double(9), statement.Double(10), statement.Text(11),
                    statement.Text(12), statement.Int(13), statement.Text(14)});
  }
  return rows;
}

std::optional<std::string> Store::FindReplay(const std::string& run_id, const std::string& prompt_hash) {
  Statement statement(db_, R"sql(
      SELECT reply_text FROM llm_calls WHERE run_id = ?1 AND prompt_hash = ?2 AND error = 'none'
      ORDER BY id DESC LIMIT 1)sql");
  statement.Bind(1, run_id).Bind(2, prompt_hash);
  if (!statement.Step()) {
    return std::nullopt;
  }
  return statement.Text(0);
}

void Store::PutStageOutcome(const std::string& run_id, const std::string& stage, int seq,
                            const std::string& outcome_json) {
  Statement statement(db_, R"sql(
      INSERT OR REPLACE INTO stage_outcomes (run_id, stage, seq, outcome_json) VALUES (?1, ?2, ?3, ?4))sql");
  statement.Bind(1, run_id).Bind(2, stage).Bind(3, static_cast<int64_t>(seq)).Bind(4, outcome_json);
  statement.Step();
}

}  // namespace egg::store
