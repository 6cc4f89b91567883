// The one body framing the server accepts (RFC 9112 section 6); every other one is refused by
// name, never guessed at.
#include "engine/server/http_framing.h"

#include <gtest/gtest.h>

namespace sparkglm::server {
namespace {

std::string problem(std::vector<std::string_view> cl, std::vector<std::string_view> te,
                    int version = 11) {
  return framing_problem({version, std::move(cl), std::move(te)});
}

TEST(HttpFraming, ContentCodingsOtherThanIdentityAreNamed) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(unsupported_content_coding(V{}), "");
  EXPECT_EQ(unsupported_content_coding(V{"identity"}), "");
  EXPECT_EQ(unsupported_content_coding(V{" IDENTITY ", ""}), "");
  EXPECT_EQ(unsupported_content_coding(V{"gzip"}), "gzip");
  EXPECT_EQ(unsupported_content_coding(V{"identity, br"}), "br");
  EXPECT_EQ(unsupported_content_coding(V{"identity", " deflate ,gzip"}), "deflate");
}

TEST(HttpFraming, AcceptsOneContentLengthOrChunkedAlone) {
  EXPECT_EQ(problem({}, {}), "");
  EXPECT_EQ(problem({"0"}, {}), "");
  EXPECT_EQ(problem({"1234"}, {}), "");
  EXPECT_EQ(problem({}, {"chunked"}), "");
  EXPECT_EQ(problem({}, {" Chunked "}), "");
  EXPECT_EQ(problem({"5"}, {}, 10), "");
}

TEST(HttpFraming, TransferCodingsOtherThanChunkedAreRefused) {
  for (std::string_view te : {"identity", "xchunked", "chunked, identity", "gzip, chunked",
                              "chunked, chunked", "", " , chunked"}) {
    const std::string p = problem({}, {te});
    EXPECT_NE(p.find("is not supported"), std::string::npos) << te << ": " << p;
  }
  // Two fields form one list: "chunked" twice.
  EXPECT_NE(problem({}, {"chunked", "chunked"}), "");
}

TEST(HttpFraming, TransferEncodingWithContentLengthIsRefused) {
  EXPECT_EQ(problem({"5"}, {"identity"}),
            "a request may not have both Transfer-Encoding and Content-Length");
  EXPECT_EQ(problem({"5"}, {"chunked"}),
            "a request may not have both Transfer-Encoding and Content-Length");
}

TEST(HttpFraming, TransferEncodingInHttp10IsRefused) {
  EXPECT_EQ(problem({}, {"chunked"}, 10),
            "Transfer-Encoding is not allowed in an HTTP/1.0 request");
}

TEST(HttpFraming, RepeatedOrListedContentLengthIsRefused) {
  EXPECT_EQ(problem({"5", "5"}, {}), "Content-Length is given more than once");
  EXPECT_EQ(problem({"5", "6"}, {}), "Content-Length is given more than once");
  for (std::string_view cl : {"5, 5", "5,5", "+5", "-1", "0x10", "", "5 5", "99999999999999999999"})
    EXPECT_NE(problem({cl}, {}).find("is not one decimal number"), std::string::npos) << cl;
}

}  // namespace
}  // namespace sparkglm::server
