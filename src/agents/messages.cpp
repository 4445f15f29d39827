#include "agents/messages.h"

#include <algorithm>
#include <array>

namespace egg::agents {
namespace {

constexpr std::array<const char*, 6> kBottlenecks = {"memory",    "compute", "latency",
                                                     "occupancy", "launch",  "other"};
constexpr const char* kFence = "```";

std::string Trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return "";
  }
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// The candidate file of a Code or Debug reply, or a reason it is missing.
Parsed<std::string> SourceIn(const std::string& reply) {
  auto source = FencedBlock(reply, {"python", "py", "python3"});
  if (!source) {
    return {std::nullopt, "the reply has no ```python code block"};
  }
  if (source->find("class ModelNew") == std::string::npos) {
    return {std::nullopt, "the python block does not define class ModelNew"};
  }
  return {*source, ""};
}

std::string StringField(const Json& object, const char* name) {
  const auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

}  // namespace

std::optional<std::string> FencedBlock(const std::string& text, const std::vector<std::string>& languages) {
  size_t position = 0;
  while ((position = text.find(kFence, position)) != std::string::npos) {
    const size_t info_end = text.find('\n', position);
    if (info_end == std::string::npos) {
      return std::nullopt;
    }
    const std::string info = Trim(text.substr(position + 3, info_end - position - 3));
    const size_t close = text.find(kFence, info_end + 1);
    if (close == std::string::npos) {
      return std::nullopt;
    }
    if (std::find(languages.begin(), languages.end(), info) != languages.end()) {
      return text.substr(info_end + 1, close - info_end - 1);
    }
    position = close + 3;
  }
  return std::nullopt;
}

std::optional<Json> JsonObjectIn(const std::string& text) {
  std::string candidate = FencedBlock(text, {"json"}).value_or("");
  if (candidate.empty()) {
    const size_t open = text.find('{');
    const size_t close = text.rfind('}');
    if (open == std::string::npos || close == std::string::npos || close < open) {
      return std::nullopt;
    }
    candidate = text.substr(open, close - open + 1);
  }
  Json parsed = Json::parse(candidate, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return std::nullopt;
  }
  return std::optional<Json>(std::in_place, std::move(parsed));
}

Parsed<ProfileReport> ParseProfileReport(const std::string& reply) {
  const auto object = JsonObjectIn(reply);
  if (!object) {
    return {std::nullopt, "the reply holds no valid JSON object"};
  }
  ProfileReport report;
  report.bottleneck = StringField(*object, "bottleneck");
  report.move = StringField(*object, "move");
  report.rationale = StringField(*object, "rationale");
  if (std::find(kBottlenecks.begin(), kBottlenecks.end(), report.bottleneck) == kBottlenecks.end()) {
    return {std::nullopt, "\"bottleneck\" must be one of memory, compute, latency, occupancy, launch, other"};
  }
  if (report.move.empty()) {
    return {std::nullopt, "\"move\" must be a non-empty string"};
  }
  if (const auto evidence = object->find("evidence"); evidence != object->end() && evidence->is_array()) {
    for (const Json& item : *evidence) {
      report.evidence.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    }
  }
  if (const auto near = object->find("near_roofline"); near != object->end() && near->is_boolean()) {
    report.near_roofline = near->get<bool>();
  }
  return {report, ""};
}

Parsed<CodeProposal> ParseCodeProposal(const std::string& reply) {
  Parsed<std::string> source = SourceIn(reply);
  if (!source.value) {
    return {std::nullopt, source.problem};
  }
  CodeProposal proposal;
  proposal.source = *source.value;
  if (const auto meta = JsonObjectIn(reply.substr(0, reply.find("```python")))) {
    proposal.description = StringField(*meta, "description");
    proposal.move = StringField(*meta, "move");
  }
  return {proposal, ""};
}

Parsed<DebugReport> ParseDebugReport(const std::string& reply) {
  Parsed<std::string> source = SourceIn(reply);
  if (!source.value) {
    return {std::nullopt, source.problem};
  }
  DebugReport report;
  report.source = *source.value;
  if (const auto meta = JsonObjectIn(reply.substr(0, reply.find("```python")))) {
    report.diagnosis = StringField(*meta, "diagnosis");
  }
  return {report, ""};
}

Json ToJson(const ProfileReport& report) {
  return Json{{"bottleneck", report.bottleneck},
              {"evidence", report.evidence},
              {"move", report.move},
              {"rationale", report.rationale},
              {"near_roofline", report.near_roofline}};
}

Json ToJson(const CodeProposal& proposal) {
  return Json{{"description", proposal.description},
              {"move", proposal.move},
              {"source_chars", proposal.source.size()}};
}

Json ToJson(const DebugReport& report) {
  return Json{{"diagnosis", report.diagnosis}, {"source_chars", report.source.size()}};
}

Json ToJson(const AttemptSummary& summary) {
  return Json{{"id", summary.id},
              {"move", summary.move},
              {"status", summary.status},
              {"median_ms", summary.median_ms},
              {"accepted", summary.accepted}};
}

}  // namespace egg::agents
