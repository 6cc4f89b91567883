#pragma once
// tinyglm-micro with the default dummy seed, loaded once per test binary and shared by the
// end-to-end tests (runner, scheduler).
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm::testing {

inline const LoadedModel& micro_model() {
  static ThreadPool pool(2);
  static const auto model = load_model_preset("tinyglm-micro", 0, kDefaultDummySeed, pool);
  return *model;
}

}  // namespace sparkglm::testing
