#include "engine/dist/rank_leader.h"

#include "engine/core/error.h"
#include "engine/dist/step_message.h"

namespace sparkglm::dist {

RankLeader::RankLeader(std::unique_ptr<ModelRunner> inner, Communicator& comm)
    : inner_(std::move(inner)), comm_(comm) {}

RankLeader::~RankLeader() {
  try {
    stop();
  } catch (...) {  // a rank already gone: nothing left to tell it
  }
}

void RankLeader::check(const ForwardBatch& batch) const {
  const CacheGeometry g = inner_->cache_geometry();
  batch.validate(inner_->config(), g.block_size, g.num_blocks, g.num_state_slots, g.num_snapshots,
                 g.state_records);
}

template <typename Call>
void RankLeader::lockstep(const std::vector<uint8_t>& message, Call&& call) {
  SPARKGLM_ASSERT(!stopped_, "RankLeader: a call after stop()");
  try {
    broadcast_message(comm_, message, 0, kMaxStepMessageBytes);
    call();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kDeviceFatal) throw;
    throw Error(ErrorKind::kDeviceFatal, "a step failed on rank 0 after the ranks began it (" +
                                             e.message() + "): the ranks are out of step");
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kDeviceFatal, std::string("a step failed on rank 0 after the ranks "
                                                     "began it (") +
                                             e.what() + "): the ranks are out of step");
  }
}

void RankLeader::forward(const ForwardBatch& batch, ForwardOutput& out) {
  check(batch);
  StepMessage m;
  m.call = StepCall::kForward;
  m.batch = batch;
  lockstep(encode_step(m), [&] { inner_->forward(batch, out); });
}

void RankLeader::forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                             ForwardOutput& out) {
  check(batch);
  StepMessage m;
  m.call = StepCall::kForwardMtp;
  m.batch = batch;
  m.hidden = hidden;
  lockstep(encode_step(m), [&] { inner_->forward_mtp(batch, hidden, out); });
}

void RankLeader::submit(const ForwardBatch& batch, const StepSampling& sampling) {
  check(batch);
  StepMessage m;
  m.call = StepCall::kSubmit;
  m.batch = batch;
  m.sampling.picked = sampling.picked;
  m.sampling.draws = sampling.draws;
  m.sampling.token_from = sampling.token_from;
  m.sampling.mask_row = sampling.mask_row;
  m.sampling.mask_words = sampling.mask_words;
  // Drafts inside the step are not sent to the ranks (their steps must run the same
  // collectives): the drafter runs the MTP module itself, through forward_mtp. Only such a step
  // is copied to drop the request.
  if (!sampling.draft_on_picks) {
    lockstep(encode_step(m), [&] { inner_->submit(batch, sampling); });
    return;
  }
  StepSampling local = sampling;
  local.draft_on_picks = false;
  lockstep(encode_step(m), [&] { inner_->submit(batch, local); });
}

void RankLeader::collect(StepResult& result) {
  StepMessage m;
  m.call = StepCall::kCollect;
  lockstep(encode_step(m), [&] { inner_->collect(result); });
}

void RankLeader::stop() {
  if (stopped_) return;
  stopped_ = true;
  StepMessage m;
  m.call = StepCall::kStop;
  broadcast_message(comm_, encode_step(m), 0, kMaxStepMessageBytes);
}

}  // namespace sparkglm::dist
