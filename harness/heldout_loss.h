#pragma once
// The held-out loss of a trained model: how well it predicts the replies of examples it never saw,
// measured through the engine itself, so a kernel, format or state bug that damages the model
// shows as a number (issue 18's quality signal; its gate is gates/quality_gate.h).
//
// A held-out set (tinyglm/train/heldout.py writes one beside the trained weights) holds examples
// of named tasks: token ids, prompt then reply, and where the reply starts. Each example is run as
// the server runs a prompt: prefill chunks of `chunk` tokens on one state slot, the caches carried
// across chunks, logits of every row. Row t's logits predict token t + 1; the reply's tokens are
// scored:
//   nll       mean -log softmax(logits)[target] over the task's reply tokens (nats per token)
//   accuracy  the share of reply tokens whose target is the logits' argmax (lowest id on ties)
//   exact     examples whose every reply token is the argmax (the greedy reply, teacher-forced)
// The set's overall nll and accuracy are the means over its tasks (each task counts once).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model_runner.h"

namespace sparkglm::harness {

struct HeldoutExample {
  std::string task;
  int reply_from = 0;  // index of the reply's first token
  std::vector<int32_t> tokens;
};

struct HeldoutSet {
  std::string generator;  // the data generator's version, as the file states it
  std::vector<HeldoutExample> examples;
};

// Reads a "sparkglm.heldout/1" file. A field missing or of the wrong type, a token outside
// [0, vocab_size), an empty reply or prompt, an example longer than max_tokens, more than 4096
// examples or a file over 64 MiB is an Error(kInvalidArgument) naming the example and field.
HeldoutSet read_heldout(const std::string& path, int vocab_size, int64_t max_tokens);

struct TaskLoss {
  std::string task;
  int examples = 0;
  int exact = 0;
  int64_t tokens = 0;  // reply tokens scored
  double nll = 0;
  double accuracy = 0;
};

struct HeldoutLoss {
  std::vector<TaskLoss> tasks;  // by task name
  double nll = 0;
  double accuracy = 0;
  nlohmann::json to_json() const;

  // The set's loss from its tasks' (sorted by name): the means over tasks, each counting once.
  // score_heldout and the verifier of a quality bundle both derive the means here.
  static HeldoutLoss of_tasks(std::vector<TaskLoss> tasks);
};

// How each prefill chunk picks its state slot: normally the sequence's own slot (0). A negative
// control passes another rule to show that the loss catches a state not carried across chunks.
using SlotForChunk = std::function<int32_t(int chunk_index)>;

// Scores every example on `runner` (a fresh sequence each: position 0 on slot 0 and blocks
// [0, n / block_size]). The runner needs ceil(longest / block_size) blocks and, with `slot_for`,
// the slots it names. With `token_nll`, it also receives each reply token's nll, in set order.
HeldoutLoss score_heldout(ModelRunner& runner, const HeldoutSet& set, int chunk,
                          const SlotForChunk& slot_for = nullptr,
                          std::vector<double>* token_nll = nullptr);

}  // namespace sparkglm::harness
