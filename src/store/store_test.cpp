#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/error.h"

namespace egg::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("egg-store-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "nested" / "egg.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static EvaluationRow Row(const std::string& key, const std::string& status) {
    return {key,    "/t.py", "taskhash", "/c.py", "candhash", "NVIDIA H200",
            "2.11", "3.6",   "1",        "{}",    status,     R"({"status":")" + status + R"("})"};
  }

  static RunRow Run(const std::string& id) {
    RunRow row;
    row.id = id;
    row.task_path = "/t.py";
    row.status = "ok";
    return row;
  }
  static CandidateRow Candidate(const std::string& id, const std::string& run_id) {
    CandidateRow row;
    row.id = id;
    row.run_id = run_id;
    row.stage = "stage1.seeds";
    row.source = "ModelNew " + id;
    return row;
  }
  static LlmCallRow Call(const std::string& run_id) {
    LlmCallRow row;
    row.run_id = run_id;
    row.purpose = "seed";
    return row;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(StoreTest, ProcessesOpeningAFreshStoreAtOnceAllSucceed) {
  constexpr int kOpeners = 6;
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < kOpeners; ++i) {
    threads.emplace_back([&, i] {
      auto store = Store::Open(path_);  // separate connections, as separate egg processes have
      store->PutEvaluation(Row("k" + std::to_string(i), "ok"));
      ++opened;
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(opened, kOpeners);
  auto store = Store::Open(path_);
  EXPECT_EQ(store->SchemaVersion(), kSchemaVersion);
  EXPECT_TRUE(store->FindEvaluation("k5").has_value());
}

TEST_F(StoreTest, CreatesSchemaAndPersistsAcrossOpens) {
  {
    auto store = Store::Open(path_);
    EXPECT_EQ(store->SchemaVersion(), kSchemaVersion);
    store->PutEvaluation(Row("k1", "ok"));
    store->PutEvaluation(Row("k2", "timeout"));
  }
  auto reopened = Store::Open(path_);
  ASSERT_TRUE(reopened->FindEvaluation("k1").has_value());
  EXPECT_EQ(*reopened->FindEvaluation("k2"), R"({"status":"timeout"})");
  EXPECT_FALSE(reopened->FindEvaluation("missing").has_value());
  const auto rows = reopened->EvaluationsForTask("taskhash");
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[1].status, "timeout");
}

TEST_F(StoreTest, UsesWriteAheadLog) {
  auto store = Store::Open(path_);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &statement, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(statement), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)), "wal");
  sqlite3_finalize(statement);
  sqlite3_close(db);
}

TEST_F(StoreTest, ReplacesRowWithSameKey) {
  auto store = Store::Open(path_);
  store->PutEvaluation(Row("k", "crash"));
  store->PutEvaluation(Row("k", "ok"));
  EXPECT_EQ(*store->FindEvaluation("k"), R"({"status":"ok"})");
  EXPECT_EQ(store->EvaluationsForTask("taskhash").size(), 1U);
}

TEST_F(StoreTest, RefusesNewerSchema) {
  { auto store = Store::Open(path_); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    Store::Open(path_);
    FAIL() << "a newer schema must be refused";
  } catch (const EggError& error) {
    EXPECT_EQ(error.Kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(error.what()).find("99"), std::string::npos);
  }
}

TEST_F(StoreTest, StoresProfiles) {
  auto store = Store::Open(path_);
  store->PutProfile({"p", "t", "c", "gpu", R"({"kernels":[]})"});
  EXPECT_EQ(*store->FindProfile("p"), R"({"kernels":[]})");
}

TEST_F(StoreTest, StoresScreenings) {
  auto store = Store::Open(path_);
  store->PutScreening({"s1", "t", "c1", "ok", "", R"({"mean":1.0})", 0.0});
  store->PutScreening({"s2", "t", "c2", "compile_error", "import failed", "null", std::nullopt});
  const auto ok = store->FindScreening("s1");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->candidate_hash, "c1");
  EXPECT_EQ(ok->time_json, R"({"mean":1.0})");
  EXPECT_EQ(ok->max_abs_err, std::optional<double>(0.0));
  const auto failed = store->FindScreening("s2");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status, "compile_error");
  EXPECT_EQ(failed->reason, "import failed");
  EXPECT_FALSE(failed->max_abs_err.has_value());
  EXPECT_FALSE(store->FindScreening("s3").has_value());
}

TEST_F(StoreTest, MigratesAVersionTwoStoreToScreenings) {
  {
    auto store = Store::Open(path_);
    store->PutEvaluation(Row("k1", "ok"));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "DROP TABLE screenings; ALTER TABLE candidates DROP COLUMN design_json; "
                         "PRAGMA user_version = 2",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open(path_);
  EXPECT_EQ(store->SchemaVersion(), kSchemaVersion);
  EXPECT_TRUE(store->FindEvaluation("k1").has_value());
  store->PutScreening({"s", "t", "c", "ok", "", "null", std::nullopt});
  EXPECT_TRUE(store->FindScreening("s").has_value());
}

TEST_F(StoreTest, CandidatesKeepTheirDesignRecordOrNone) {
  auto store = Store::Open(path_);
  store->PutRun(Run("r"));
  CandidateRow designed = Candidate("r/c1", "r");
  designed.design_json = R"({"seed":1})";
  const CandidateRow written = Candidate("r/c2", "r");
  store->PutCandidate(designed);
  store->PutCandidate(written);
  const auto rows = store->CandidatesForRun("r");
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0].design_json, std::optional<std::string>(R"({"seed":1})"));
  EXPECT_FALSE(rows[1].design_json.has_value());
}

TEST_F(StoreTest, MigratesAVersionThreeStoreToDesignRecords) {
  // A version-3 store, made as that egg made it: candidates without a design column.
  sqlite3* db = nullptr;
  {
    auto store = Store::Open(path_);
    store->PutRun(Run("old"));
  }
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db,
                   "ALTER TABLE candidates DROP COLUMN design_json; PRAGMA user_version = 3;"
                   "INSERT INTO candidates (id, run_id, stage, origin, parent_id, source, description, "
                   "move, eval_key, status, median_ms) VALUES ('old/c', 'old', 'stage1.seeds', 'code', '', "
                   "'ModelNew old', '', '', '', 'ok', 1.5)",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open(path_);
  EXPECT_EQ(store->SchemaVersion(), 4);
  auto rows = store->CandidatesForRun("old");
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].source, "ModelNew old");
  EXPECT_EQ(rows[0].median_ms, std::optional<double>(1.5));
  EXPECT_FALSE(rows[0].design_json.has_value()) << "an old run's candidates have no record";
  CandidateRow designed = rows[0];
  designed.design_json = R"({"seed":2})";
  store->PutCandidate(designed);
  rows = store->CandidatesForRun("old");
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].design_json, std::optional<std::string>(R"({"seed":2})"));
}

TEST_F(StoreTest, MergesAnotherStoreWithFreshAutoincrementIds) {
  const std::string other_path = (dir_ / "other.db").string();
  {
    auto other = Store::Open(other_path);
    other->PutEvaluation(Row("remote", "ok"));
    other->PutRun(Run("run-remote"));
    other->PutLlmCall(Call("run-remote"));
    other->PutDecision({.run_id = "run-remote",
                        .stage = "stage1.seeds",
                        .round = 2,
                        .candidate_id = "c",
                        .move = "",
                        .accepted = true,
                        .reason = "",
                        .incumbent_ms = {},
                        .candidate_ms = {}});
  }
  auto store = Store::Open(path_);
  store->PutEvaluation(Row("local", "ok"));
  store->PutRun(Run("run-local"));
  store->PutLlmCall(Call("run-local"));
  store->MergeFrom(other_path);
  EXPECT_TRUE(store->FindEvaluation("local").has_value());
  EXPECT_TRUE(store->FindEvaluation("remote").has_value());
  ASSERT_TRUE(store->FindRun("run-remote").has_value());
  EXPECT_EQ(store->LlmCallsForRun("run-local").size(), 1U);
  EXPECT_EQ(store->LlmCallsForRun("run-remote").size(), 1U);
  ASSERT_EQ(store->DecisionsForRun("run-remote").size(), 1U);
  EXPECT_EQ(store->DecisionsForRun("run-remote")[0].round, 2);
}

}  // namespace
}  // namespace egg::store
