// The LlmClient behind MakeLlmClient, with the transport and the clock injectable (tests use fakes).
#pragma once

#include <memory>

#include "llm/http_transport.h"
#include "llm/llm.h"
#include "llm/retry.h"

namespace egg::llm {

// `clock` must outlive the client.
std::unique_ptr<LlmClient> MakeLlmClient(const LlmConfig& config, CallRecorder recorder,
                                         std::shared_ptr<HttpTransport> transport, Clock& clock);

}  // namespace egg::llm
