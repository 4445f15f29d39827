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

// The design record a backend generated a candidate file from (the expert compiler's CandidateDesign, as its
// JSON: expert/candidate.h). The pipeline and the store keep it beside the source and hand the incumbent's
// back to the agents; only the backend that wrote it reads inside. A file an LLM wrote has none.
struct Design {
  Json record;
  bool operator==(const Design& other) const = default;
};

struct CodeProposal {
  std::string source;  // the whole candidate file
  std::string description;
  std::string move;
  std::string author = kAuthorLlm;
  bool untrusted = true;
  // What the source was generated from; none for LLM-written source.
  std::optional<Design> design = std::nullopt;
};

struct DebugReport {
  std::string source;  // the whole repaired file
  std::string diagnosis;
  std::string author = kAuthorLlm;
  bool untrusted = true;
  std::optional<Design> design = std::nullopt;
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
