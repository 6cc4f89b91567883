// What a client can put into the server log: nothing that starts a line of its own, moves a
// terminal's cursor, or makes a line longer than the caps.
#include "engine/server/server_log.h"

#include <gtest/gtest.h>

#include <string>

namespace sparkglm::server {
namespace {

TEST(ServerLog, ControlCharactersAreEscapedNotWritten) {
  const std::string forged =
      "abc\n2026-12-01T00:00:00.000Z sparkglm-serve 9.9.9 (forged)\r\x1b[2J\t\x7f end";
  const std::string out = log_safe(forged, kMaxLogLineBytes);
  EXPECT_EQ(out,
            "abc\\n2026-12-01T00:00:00.000Z sparkglm-serve 9.9.9 (forged)\\r\\x1b[2J\\t\\x7f end");
  for (char c : out) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << out;
}

TEST(ServerLog, C1ControlsLineSeparatorsAndInvalidUtf8AreEscaped) {
  // U+009B (CSI) and U+0085 (NEL) in UTF-8, U+2028, a lone continuation byte, a truncated
  // sequence; valid text (é, a CJK character) passes as is.
  const std::string in =
      "\xc2\x9b"
      "2J \xc2\x85 \xe2\x80\xa8 \x80 \xe4\xb8 \xc3\xa9\xe4\xb8\xad";
  EXPECT_EQ(log_safe(in, kMaxLogLineBytes),
            "\\u009b2J \\u0085 \\u2028 \\x80 \\xe4\\xb8 \xc3\xa9\xe4\xb8\xad");
}

TEST(ServerLog, JsonLinesStayJson) {
  const std::string json = R"({"model":"a\"b\\c","x":"\u001b"})";
  EXPECT_EQ(log_safe(json, kMaxLogLineBytes), json);
}

TEST(ServerLog, LongLinesAreCutWithTheCountLeftOut) {
  const std::string big(50u << 20, 'a');
  const std::string out = log_safe(big, kMaxLogLineBytes);
  EXPECT_LE(out.size(), kMaxLogLineBytes + 40);
  EXPECT_EQ(out.substr(kMaxLogLineBytes),
            "...[" + std::to_string(big.size() - kMaxLogLineBytes) + " bytes cut]");
  // An escape is never split: 3 bytes of room do not hold "\x01" (4 bytes).
  EXPECT_EQ(log_safe("ab\x01", 5), "ab...[1 bytes cut]");
}

TEST(ServerLog, ClientTextIsQuotedEscapedAndShort) {
  EXPECT_EQ(client_text("salt"), "\"salt\"");
  // A quote or backslash cannot end the field early or fake an escape.
  EXPECT_EQ(client_text("a\" status=ok \\n"), "\"a\\\" status=ok \\\\n\"");
  EXPECT_EQ(client_text("x\ny"), "\"x\\ny\"");
  const std::string big(1u << 20, 'z');
  const std::string out = client_text(big);
  EXPECT_EQ(out, "\"" + std::string(kMaxClientTextBytes, 'z') + "\"...[" +
                     std::to_string(big.size() - kMaxClientTextBytes) + " bytes cut]");
}

}  // namespace
}  // namespace sparkglm::server
