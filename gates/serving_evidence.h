#pragma once
// What a serving run shows besides its per-case metrics, recorded in qualification.json so that a
// reader can judge the numbers: the client's own cost per event and how the events arrived
// (`client`), and the server's counters and SSE emit delay as deltas over the run (`counters`,
// `sse_emit_delay`), taken from its /metrics before and after.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/request_record.h"

namespace sparkglm::gates {

// The client's own cost per event against the gaps it timed (QUALIFICATION.md: it must stay far
// below them), and its delivery summary (events per socket read).
nlohmann::json client_cost(const std::vector<harness::RequestRecord>& records);

// A bursty server cannot qualify quietly: the warning every card shows, naming the numbers;
// nullopt when the delivery was not bursty.
std::optional<std::string> bursty_delivery_warning(
    const std::vector<harness::RequestRecord>& records);

// QUALIFICATION.md: counters are reported as deltas over the run, never cumulative. Every
// Prometheus counter (`*_total`) the server exposes, after minus before, per arm. A malformed
// scrape is recorded under "error", not hidden.
nlohmann::json counter_deltas(const std::string& before_text, const std::string& after_text);

// The server's delay from sampling a token to writing its event (sparkglm_sse_emit_delay_seconds),
// as a delta over the run: the server-side half of "tokens leave when they are made", beside the
// client's events-per-read. Null when the server has no such histogram (another server, --url).
nlohmann::json emit_delay(const std::string& before_text, const std::string& after_text);

}  // namespace sparkglm::gates
