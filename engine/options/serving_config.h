#pragma once
// The one typed configuration of a serving process, filled from the effective configuration in
// one place (fill_serving_config): the runner request (model, backend, cache geometry, memory),
// the scheduler limits, the HTTP routes' and server's options, and the process's own settings.
// Nothing else reads serving options by name; sparkglm-serve builds everything from this struct.
//
// Every registry option is either read here or marked `not_implemented` in the registry, and a
// not-implemented option set to anything but its built-in value is refused here, before a byte of
// the model loads. tests/options/serving_config_test.cpp walks the registry and fails on an
// option that is neither, so an option that nothing reads cannot be registered, documented and
// qualified.
//
// Adding an option: (1) its OptionSpec in serving_options.cpp; (2) one read in the fill function
// of the struct it configures (serving_config.cpp), unconditionally, so that the registry test
// sees it; (3) a test of its effect where the behaviour lives.
//
// The fields that depend on the model (the scheduler's max_seq_len when --max-seq-len is 0, the
// routes' model, EOS ids and pool size) are completed by the caller once the runner is built.
#include <string>

#include "engine/backend/runner_factory.h"
#include "engine/dist/rank_group.h"
#include "engine/options/effective_config.h"
#include "engine/runtime/scheduler.h"
#include "engine/server/http_server.h"
#include "engine/server/openai_routes.h"

namespace sparkglm {

struct ServingConfig {
  RunnerRequest runner;
  // max_seq_len is the option's value (0 = the model's window) until the runner says what it is.
  SchedulerLimits scheduler;
  server::RouteOptions routes;  // api_key resolved from --api-key / -file / -env
  server::HttpServerOptions http;
  dist::RankSettings ranks;      // world size, this rank, whether it starts the others, rendezvous
  int threads = 0;               // CPU worker threads (0 = one per core)
  double shutdown_grace_s = 30;  // seconds in-flight requests get after SIGTERM
};

// Throws Error(kUnsupported) "--NAME: not implemented yet (why); only the default V is accepted"
// for the first not-implemented option whose value differs from its built-in. Reads nothing
// (EffectiveConfig::reads() is unchanged).
void check_implemented(const EffectiveConfig& config);

// check_implemented, then every implemented option into its field. Errors name the option.
ServingConfig fill_serving_config(const EffectiveConfig& config);

}  // namespace sparkglm
