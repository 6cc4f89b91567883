#include "operator/text_diff.h"

#include <gtest/gtest.h>

namespace sparkglm::operator_tool {
namespace {

TEST(TextDiff, EqualTextsHaveNoDiff) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "old", "new"), "");
}

TEST(TextDiff, OneChangedLineShowsAsRemovedAndAddedWithContext) {
  const std::string old_text = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  const std::string new_text = "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n";
  EXPECT_EQ(unified_diff(old_text, new_text, "a.json", "a.json (new)"),
            "--- a.json\n+++ a.json (new)\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8\n");
}

TEST(TextDiff, DistantChangesGetSeparateHunks) {
  std::string old_text, new_text;
  for (int i = 0; i < 30; ++i) {
    old_text += std::to_string(i) + "\n";
    new_text += (i == 2 || i == 25 ? "x" : std::to_string(i)) + "\n";
  }
  const std::string d = unified_diff(old_text, new_text, "o", "n", 1);
  EXPECT_EQ(
      d, "--- o\n+++ n\n@@ -2,3 +2,3 @@\n 1\n-2\n+x\n 3\n@@ -25,3 +25,3 @@\n 24\n-25\n+x\n 26\n");
}

TEST(TextDiff, AddedAndRemovedLinesAtTheEnds) {
  EXPECT_EQ(unified_diff("a\n", "a\nb\n", "o", "n"), "--- o\n+++ n\n@@ -1,1 +1,2 @@\n a\n+b\n");
  EXPECT_EQ(unified_diff("a\nb\n", "b\n", "o", "n"), "--- o\n+++ n\n@@ -1,2 +1,1 @@\n-a\n b\n");
  EXPECT_EQ(unified_diff("", "x\n", "o", "n"), "--- o\n+++ n\n@@ -0,0 +1,1 @@\n+x\n");
}

}  // namespace
}  // namespace sparkglm::operator_tool
