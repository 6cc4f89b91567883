// ForwardBatch::validate on the prefix cache's KDA snapshot fields: a snapshot index outside the
// runner's snapshots, or a restore into a sequence that starts at position 0, is refused by name.
#include "engine/model/forward_batch.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"
#include "engine/model/config.h"

namespace sparkglm {
namespace {

std::string error_of(const ForwardBatch& b, int num_snapshots) {
  try {
    b.validate(preset_config("tinyglm-micro"), 16, 8, 4, num_snapshots);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ForwardBatch, SnapshotsMustExistAndARestoreMustResumeAPosition) {
  ForwardBatch b;
  b.add_sequence({1, 2, 3}, 64, 1, {0, 1, 2, 3, 4});
  b.seqs[0].restore_snapshot = 2;
  b.seqs[0].save_snapshot = 3;
  EXPECT_EQ(error_of(b, 4), "");
  EXPECT_NE(error_of(b, 3).find("sequence 0: state snapshot 3 outside [0, 3)"), std::string::npos)
      << error_of(b, 3);
  EXPECT_NE(error_of(b, 0).find("state snapshot 2 outside [0, 0)"), std::string::npos);
  ForwardBatch fresh;
  fresh.add_sequence({1, 2}, 0, 0, {0});
  fresh.seqs[0].restore_snapshot = 0;
  EXPECT_NE(error_of(fresh, 4).find("a restored state must resume at a position above 0"),
            std::string::npos);
}

}  // namespace
}  // namespace sparkglm
