#pragma once
// Rank 0's runner when several ranks serve one model: the scheduler calls it like any runner, and
// before each call it sends the other ranks the call and its inputs (step_message.h), which they
// replay on their own shards (rank_follower.h), so that every rank runs the same collectives in
// the same order.
//
// Lockstep: a batch is validated here before it is sent, so a bad batch fails its requests on
// rank 0 alone and the engine carries on. Once a call is sent, any failure is Error(kDeviceFatal):
// the ranks may be inside different collectives and cannot safely go on (the server answers 503
// and exits; rank_follower exits when rank 0's connection closes).
#include <memory>

#include "engine/dist/communicator.h"
#include "engine/model/model_runner.h"

namespace sparkglm::dist {

class RankLeader : public ModelRunner {
 public:
  RankLeader(std::unique_ptr<ModelRunner> inner, Communicator& comm);
  ~RankLeader() override;  // stop() when not yet sent

  const ModelConfig& config() const override { return inner_->config(); }
  CacheGeometry cache_geometry() const override { return inner_->cache_geometry(); }
  void forward(const ForwardBatch& batch, ForwardOutput& out) override;
  void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                   ForwardOutput& out) override;
  void submit(const ForwardBatch& batch, const StepSampling& sampling) override;
  void collect(StepResult& result) override;
  bool draws_sampled() const override { return inner_->draws_sampled(); }
  // Not sent to the ranks (their steps must run the same collectives), as draft_on_picks is not.
  bool drafts_over_prompts() const override { return false; }

  // Tells the other ranks to exit their loop (0). Safe to call twice; a lost rank is ignored.
  void stop();

 private:
  void check(const ForwardBatch& batch) const;  // Error(kInvalidArgument), before anything is sent
  template <typename Call>
  void lockstep(const std::vector<uint8_t>& message, Call&& call);

  std::unique_ptr<ModelRunner> inner_;
  Communicator& comm_;
  bool stopped_ = false;
};

}  // namespace sparkglm::dist
