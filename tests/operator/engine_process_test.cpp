#include "operator/engine_process.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"

namespace sparkglm::operator_tool {
namespace {

namespace fs = std::filesystem;

TEST(EngineProcess, APortHeldByAListenerIsNotFree) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  EXPECT_FALSE(port_is_free("127.0.0.1", port));
  close(fd);
  EXPECT_TRUE(port_is_free("127.0.0.1", port));
}

TEST(EngineProcess, APidFileOfAnotherProgramIsStaleAndRemoved) {
  const fs::path dir = fs::temp_directory_path() / ("sparkglm-state-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // This test's own pid: alive, but not sparkglm-serve, so it must never be signalled.
  std::ofstream(dir / "engine.pid") << getpid() << "\n";
  const EngineProcess engine(dir.string());
  std::string note;
  EXPECT_FALSE(engine.running(&note).has_value());
  EXPECT_NE(note.find("stale"), std::string::npos) << note;
  EXPECT_FALSE(fs::exists(dir / "engine.pid"));
  EXPECT_FALSE(engine.stop(1.0, false));
  fs::remove_all(dir);
}

TEST(EngineProcess, StartingAMissingBinaryFailsBeforeAnyProcess) {
  const fs::path dir = fs::temp_directory_path() / ("sparkglm-state2-" + std::to_string(getpid()));
  const EngineProcess engine(dir.string());
  StartRequest r;
  r.serve_binary = "/nonexistent/sparkglm-serve";
  r.bind = "127.0.0.1";
  EXPECT_THROW(engine.start(r), Error);
  EXPECT_FALSE(fs::exists(dir / "engine.pid"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sparkglm::operator_tool
