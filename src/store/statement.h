// Internal to store/: a RAII prepared SQLite statement; every failure is an IoError naming the database
// error.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "common/error.h"

namespace egg::store {

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

  Statement& Bind(int index, int64_t value) {
    sqlite3_bind_int64(statement_, index, value);
    return *this;
  }
  Statement& Bind(int index, double value) {
    sqlite3_bind_double(statement_, index, value);
    return *this;
  }
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
  sqlite3_stmt* Raw() { return statement_; }
  int64_t Int64(int column) { return sqlite3_column_int64(statement_, column); }
  double Double(int column) { return sqlite3_column_double(statement_, column); }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
};

}  // namespace egg::store
