#include "engine/dist/rank_follower.h"

#include "engine/dist/step_message.h"

namespace sparkglm::dist {

int64_t follow_rank0(ModelRunner& runner, Communicator& comm) {
  for (int64_t calls = 0;; ++calls) {
    const StepMessage m = decode_step(broadcast_message(comm, {}, 0, kMaxStepMessageBytes));
    ForwardOutput out;
    StepResult result;
    switch (m.call) {
      case StepCall::kForward:
        runner.forward(m.batch, out);
        break;
      case StepCall::kForwardMtp:
        runner.forward_mtp(m.batch, m.hidden, out);
        break;
      case StepCall::kSubmit:
        runner.submit(m.batch, m.sampling);
        break;
      case StepCall::kCollect:
        runner.collect(result);
        break;
      case StepCall::kStop:
        return calls;
    }
  }
}

}  // namespace sparkglm::dist
