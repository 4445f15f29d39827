// Typed messages between the agents of a stage, and their JSON edge. Parse* functions validate model
// output and return the value or a one-line reason it cannot be used (never throw).
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/json.h"

namespace egg::agents {

struct ProfileReport {
  std::string bottleneck;  // memory | compute | latency | occupancy | launch | other
  std::vector<std::string> evidence;
  std::string move;
  std::string rationale;
  bool near_roofline = false;
};

// Who proposed a candidate (expert | llm) and whether an LLM wrote its source: untrusted source is to be run
// in the candidate sandbox; a design move the expert compiler realized is the compiler's source.
inline constexpr const char* kAuthorExpert = "expert";
inline constexpr const char* kAuthorLlm = "llm";

struct CodeProposal {
  std::string source;  // the whole candidate file
  std::string description;
  std::string move;
  std::string author = kAuthorLlm;
  bool untrusted = true;
};

struct DebugReport {
  std::string source;  // the whole repaired file
  std::string diagnosis;
  std::string author = kAuthorLlm;
  bool untrusted = true;
};

// One line of a stage's compact history.
struct AttemptSummary {
  std::string id;
  std::string move;
  std::string status;
  std::optional<double> median_ms;
  bool accepted = false;
};

template <typename T>
struct Parsed {
  std::optional<T> value;
  std::string problem;  // why it cannot be used, when value is empty
};

Parsed<ProfileReport> ParseProfileReport(const std::string& reply);
Parsed<CodeProposal> ParseCodeProposal(const std::string& reply);
Parsed<DebugReport> ParseDebugReport(const std::string& reply);

// The first fenced block in `text` whose info string is one of `languages`, or nullopt.
std::optional<std::string> FencedBlock(const std::string& text, const std::vector<std::string>& languages);
// A JSON object from a ```json block, or else the outermost {...} of the text; nullopt if none parses.
std::optional<Json> JsonObjectIn(const std::string& text);

Json ToJson(const ProfileReport& report);
Json ToJson(const CodeProposal& proposal);
Json ToJson(const DebugReport& report);
Json ToJson(const AttemptSummary& summary);

}  // namespace egg::agents
