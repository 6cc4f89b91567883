#include "operator/engine_process.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

TEST(ProcessIdentity, NamesOneProcessByPidStartTimeAndExecutable) {
  const auto self = read_process_identity(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_GT(self->start_ticks, 0u);
  EXPECT_EQ(self->exe, fs::read_symlink("/proc/self/exe").string());
  EXPECT_TRUE(same_process(*self, *self));
  ProcessIdentity later = *self;
  later.start_ticks += 1;  // the same pid, reused by a later process
  EXPECT_FALSE(same_process(*self, later));
  ProcessIdentity renamed = *self;
  renamed.exe = "/usr/local/bin/sparkglm-serve";
  EXPECT_FALSE(same_process(*self, renamed));
  EXPECT_FALSE(read_process_identity(0).has_value());
}

TEST(ProcessIdentity, ASignalReachesOnlyTheRecordedProcess) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const auto id = read_process_identity(child);
  ASSERT_TRUE(id.has_value());
  ProcessIdentity other = *id;
  other.exe = "/opt/sparkglm/bin/sparkglm-serve";
  EXPECT_FALSE(signal_if_same(other, SIGTERM));
  other = *id;
  other.start_ticks -= 1;
  EXPECT_FALSE(signal_if_same(other, SIGTERM));
  EXPECT_TRUE(read_process_identity(child).has_value());  // untouched
  EXPECT_TRUE(signal_if_same(*id, SIGTERM));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

// A record that names this test's process, but as another executable: what a pid file left by a
// dead server looks like once the kernel gives its pid to someone else.
TEST(EngineProcess, ARecordWhoseExecutableDiffersIsStaleAndNeverSignalled) {
  const fs::path dir = fs::temp_directory_path() / ("sparkglm-state3-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const auto self = read_process_identity(getpid());
  ASSERT_TRUE(self.has_value());
  std::ofstream(dir / "engine.pid") << getpid() << "\n";
  std::ofstream(dir / "engine.json") << nlohmann::json{
      {"pid", getpid()},
      {"start_ticks", self->start_ticks},
      {"executable", (fs::path(self->exe).parent_path() /
                      "sparkglm-serve")}}.dump();
  const EngineProcess engine(dir.string());
  std::string note;
  EXPECT_FALSE(engine.running(&note).has_value());
  EXPECT_NE(note.find("is not the sparkglm-serve started here"), std::string::npos) << note;
  EXPECT_FALSE(engine.stop(1.0, true));  // this process is still here to check
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
