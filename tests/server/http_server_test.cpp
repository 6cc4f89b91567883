// The listener against clients that end their input too soon: a client that half-closes
// (shutdown(SHUT_WR)) inside a request's header or body still reads, so it is told why its
// request was refused, and the route never sees the truncated request. And against chunked bodies
// whose framing lines never end: the read buffer that holds them is bounded.
#include "engine/server/http_server.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

namespace sparkglm::server {
namespace {

class CountingHandler : public HttpHandler {
 public:
  void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    ++calls;
    exchange->respond(HttpResponse::json(200, {{"body_bytes", request.body.size()}}));
  }
  std::atomic<int> calls{0};
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions o;
    o.port = 0;
    server_ = std::make_unique<HttpServer>(o, handler_, nullptr);
    server_->start();
  }
  void TearDown() override { server_->stop(); }

  // Sends `bytes`, half-closes, and reads until the server closes (5 s at most).
  std::string exchange_half_closed(const std::string& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server_->port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval timeout{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
    ::shutdown(fd, SHUT_WR);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, size_t(n));
    ::close(fd);
    return out;
  }

  CountingHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, BodyShorterThanItsContentLengthIs400) {
  const std::string out = exchange_half_closed(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_NE(out.find("the body ended after 10 bytes of the 100 its Content-Length declares"),
            std::string::npos)
      << out;
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, ChunkedBodyWithoutItsLastChunkIs400) {
  const std::string out = exchange_half_closed(
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_NE(out.find("before its last chunk"), std::string::npos) << out;
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, HeaderCutShortIs400) {
  const std::string out = exchange_half_closed("GET /health HTTP/1.1\r\nHost: x\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_NE(out.find("the header ended before its closing blank line"), std::string::npos) << out;
  EXPECT_EQ(handler_.calls.load(), 0);
}

// Beast keeps a chunk's size line (with its extensions) and the trailer whole in the read buffer
// until their line ends, counting them against neither the header nor the body limit: without a
// cap on the buffer, one connection could make the server hold gigabytes.
TEST_F(HttpServerTest, ChunkExtensionLongerThanTheReadBufferIs400) {
  const std::string out = exchange_half_closed(
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;" +
      std::string(256u << 10, 'a') + "\r\n{}\r\n0\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out.substr(0, 300);
  EXPECT_NE(out.find("chunk size line or trailer is longer than"), std::string::npos)
      << out.substr(0, 300);
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(HttpServerTest, TrailerLongerThanTheReadBufferIs400) {
  std::string trailer;
  while (trailer.size() < (256u << 10)) trailer += "X-Pad: aaaaaaaaaaaaaaaa\r\n";
  const std::string out = exchange_half_closed(
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n" +
      trailer + "\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out.substr(0, 300);
  EXPECT_EQ(handler_.calls.load(), 0);
}

// The body is read as it arrives: a compressed one would be parsed as its compressed bytes.
TEST_F(HttpServerTest, EncodedBodyIs415NamingTheCoding) {
  const std::string out = exchange_half_closed(
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: "
      "2\r\n\r\n{}");
  EXPECT_EQ(out.rfind("HTTP/1.1 415", 0), 0u) << out;
  EXPECT_NE(out.find("Content-Encoding \\\"gzip\\\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"code\":\"unsupported_content_encoding\""), std::string::npos) << out;
  EXPECT_NE(out.find("Accept-Encoding: identity\r\n"), std::string::npos) << out;
  EXPECT_EQ(handler_.calls.load(), 0);
  const std::string plain = exchange_half_closed(
      "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Encoding: Identity\r\nContent-Length: "
      "2\r\n\r\n{}");
  EXPECT_EQ(plain.rfind("HTTP/1.1 200", 0), 0u) << plain;
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(HttpServerTest, WholeRequestOfAHalfClosedClientIsServed) {
  const std::string out =
      exchange_half_closed("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_NE(out.find("\"body_bytes\":2"), std::string::npos) << out;
  EXPECT_EQ(handler_.calls.load(), 1);
}

}  // namespace
}  // namespace sparkglm::server
