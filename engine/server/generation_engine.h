#pragma once
// What the routes need of the engine: submit a request, read its counters. The ServingEngine is
// the one implementation in production; route tests script their own.
#include <memory>

#include "engine/runtime/generation_request.h"
#include "engine/runtime/serving_engine.h"

namespace sparkglm::server {

class GenerationEngine {
 public:
  virtual ~GenerationEngine() = default;
  // Error(kCapacity) when the request can never fit; Error(kInvalidArgument) for a bad one.
  virtual std::shared_ptr<RequestHandle> submit(GenerationRequest request) = 0;
  virtual EngineStats stats() const = 0;
};

class ServingEngineAdapter : public GenerationEngine {
 public:
  explicit ServingEngineAdapter(ServingEngine& engine) : engine_(engine) {}
  std::shared_ptr<RequestHandle> submit(GenerationRequest request) override {
    return engine_.submit(std::move(request));
  }
  EngineStats stats() const override { return engine_.stats(); }

 private:
  ServingEngine& engine_;
};

}  // namespace sparkglm::server
